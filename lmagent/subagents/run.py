"""Running sub-agents: the slots that bound how many work at once, the schedule that starts
tasks as their dependencies finish, and one child's life from brief to result.json.

A child runs the same loop as every agent (run_agent) in a session of its own, with the
parent's permission gate, a stop token linked to the parent's, an iteration budget and a
wall-clock budget. Every event of a child reaches the parent's sink tagged with its agent_id
and depth, under the session id of the run the front end started (the child's own session id
is in agent_session_id). Around them come `status` events with a `phase`: started, finished
(with the status the child reported) and skipped (a task that never ran, with the reason).
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Protocol

from lmagent.core.config import Config
from lmagent.core.files import utc_now
from lmagent.core.status import (
    STATUS_BLOCKED,
    STATUS_COMPLETED,
    STATUS_ERROR,
    STATUS_INTERRUPTED,
    STATUS_MAX_ITERATIONS,
    STATUS_WAITING,
)
from lmagent.core.stop import StopToken
from lmagent.llm.client import LLMClient
from lmagent.loop.permissions import PermissionGate
from lmagent.loop.run import RunResult, run_agent
from lmagent.sessions.store import SessionStore
from lmagent.subagents.manifest import TaskSpec
from lmagent.subagents.records import (
    brief_prompt,
    check_artifacts,
    dependency_results,
    make_brief,
    make_result,
    new_agent_id,
    read_result,
    write_brief,
    write_result,
)
from lmagent.tools.registry import ToolContext, Toolset


@dataclass(frozen=True)
class BcaSettings:
    """How sub-agents run: the SUB_AGENT_* settings of the one Config."""

    concurrency: int  # sub-agents working at once, all depths together
    max_iterations: int  # loop iterations per sub-agent
    time_budget: float  # wall-clock seconds per sub-agent
    retention_days: float  # delete finished agent dirs older than this; 0 keeps them
    dependency_budget: int = 12_000  # characters of dependency results in one brief

    @classmethod
    def from_config(cls, config: Config) -> BcaSettings:
        return cls(
            concurrency=config.sub_agent_concurrency,
            max_iterations=min(config.sub_agent_max_iterations, config.max_iterations),
            time_budget=config.sub_agent_time_budget,
            retention_days=config.agent_dir_retention_days,
        )


class Team(Protocol):
    """The sub-agents of one top-level run, as the children's runner sees them (SubAgents in
    tools.py): shared settings and slots, and the tools a child gets at its depth."""

    config: Config
    settings: BcaSettings
    slots: AgentSlots
    context_length: int | None

    def toolset(self, depth: int, is_child: bool) -> Toolset: ...


OK_STATUSES = ("ok", "partial")  # results a dependant can build on
REMINDER = (
    "You stopped without calling report_result, so your parent has received nothing. Call "
    "report_result now (status, summary, artifacts you produced, data, error). Do no other work."
)
REMINDER_ITERATIONS = 2


# --------------------------------------------------------------------------- slots


class AgentSlots:
    """At most `size` sub-agents work at once, at every depth together. A parent that waits
    for its own children lends them its slot, so nesting cannot deadlock."""

    def __init__(self, size: int):
        self.free = size
        self.cond = threading.Condition()
        self.local = threading.local()

    def _wake(self) -> None:
        with self.cond:
            self.cond.notify_all()

    def _release(self) -> None:
        with self.cond:
            self.free += 1
            self.cond.notify_all()

    @contextlib.contextmanager
    def hold(self, stop: StopToken):
        """Hold a slot in this thread while the block runs; yields False if stopped first."""
        with stop.on_stop(self._wake), self.cond:
            while self.free == 0 and not stop.stopped:
                self.cond.wait()
            acquired = not stop.stopped
            if acquired:
                self.free -= 1
        if not acquired:
            yield False
            return
        self.local.held = True
        try:
            yield True
        finally:
            self.local.held = False
            self._release()

    @contextlib.contextmanager
    def lend(self):
        """Let others use this thread's slot (if it holds one) while the block runs."""
        if not getattr(self.local, "held", False):
            yield
            return
        self._release()
        try:
            yield
        finally:
            with self.cond:
                while self.free == 0:
                    self.cond.wait()
                self.free -= 1


def skipped(spec: TaskSpec, reason: str) -> dict:
    return {"task_id": spec.task_id, "status": "skipped", "reason": reason}


# --------------------------------------------------------------------------- scheduling


class Schedule:
    """Runs tasks as their dependencies finish; the slots bound how many run at once. A task
    whose dependency failed is skipped with the reason; after a stop nothing new starts."""

    def __init__(self, team: Team, ctx: ToolContext, specs: list[TaskSpec]):
        self.team = team
        self.ctx = ctx
        self.specs = specs
        self.outcomes: dict[str, dict] = {}
        self.started: set[str] = set()
        self.cond = threading.Condition()

    def wake(self) -> None:
        with self.cond:
            self.cond.notify_all()

    def run(self) -> list[dict]:
        with self.ctx.stop.on_stop(self.wake), self.team.slots.lend(), self.cond:
            while len(self.outcomes) < len(self.specs):
                if not self.start_ready():
                    self.cond.wait()
        return [self.outcomes[spec.task_id] for spec in self.specs]

    def start_ready(self) -> bool:
        """Start or skip every task that can be decided now; True if any was."""
        changed = False
        for spec in self.specs:
            if spec.task_id in self.started:
                continue
            reason = self.skip_reason(spec)
            if reason:
                self.skip(spec, reason)
            elif all(dep in self.outcomes for dep in spec.depends_on):
                self.start(spec)
            else:
                continue
            changed = True
        return changed

    def skip_reason(self, spec: TaskSpec) -> str:
        if self.ctx.stop.stopped:
            return f"not started: {self.ctx.stop.reason or 'stopped'}"
        for dep in spec.depends_on:
            outcome = self.outcomes.get(dep)
            if outcome and outcome["status"] not in OK_STATUSES:
                why = outcome.get("error") or outcome.get("reason") or "no reason given"
                return f"depends on {dep!r}, which ended with status {outcome['status']}: {why}"
        return ""

    def skip(self, spec: TaskSpec, reason: str) -> None:
        self.started.add(spec.task_id)
        self.outcomes[spec.task_id] = skipped(spec, reason)
        self.ctx.emit(
            {
                "type": "status",
                "session_id": self.ctx.session.id,
                "depth": self.ctx.depth + 1,
                "task_id": spec.task_id,
                "phase": "skipped",
                "reason": reason,
                "message": f"task {spec.task_id!r} skipped: {reason}",
            }
        )

    def start(self, spec: TaskSpec) -> None:
        self.started.add(spec.task_id)
        dependencies = [{"task_id": d, **self.outcomes[d]} for d in spec.depends_on]
        threading.Thread(
            target=self.work,
            args=(spec, dependencies),
            name=f"sub-agent {spec.task_id or 'delegate'}",
            daemon=True,
        ).start()

    def run_child(self, spec: TaskSpec, dependencies: list[dict]) -> dict:
        stop = StopToken(parent=self.ctx.stop)
        with self.team.slots.hold(stop) as acquired:
            if not acquired:
                return skipped(spec, f"not started: {stop.reason or 'stopped'}")
            return ChildRun(self.team, self.ctx, spec, dependencies, stop).run()

    def work(self, spec: TaskSpec, dependencies: list[dict]) -> None:
        try:
            outcome = self.run_child(spec, dependencies)
        except Exception as exc:  # a bug here must not leave the parent waiting forever
            outcome = {
                "task_id": spec.task_id,
                "status": "error",
                "error": f"the sub-agent could not run: {type(exc).__name__}: {exc}",
            }
        with self.cond:
            self.outcomes[spec.task_id] = outcome
            self.cond.notify_all()


# --------------------------------------------------------------------------- one child


class ChildRun:
    """One sub-agent from brief to result: its session, budgets, events and result.json."""

    def __init__(
        self,
        team: Team,
        ctx: ToolContext,
        spec: TaskSpec,
        dependencies: list[dict],
        stop: StopToken,
    ):
        self.team = team
        self.ctx = ctx
        self.spec = spec
        self.dependencies = dependencies
        self.stop = stop
        self.workspace = ctx.workspace
        self.depth = ctx.depth + 1
        self.agent_id = new_agent_id(spec.task_id)
        self.gate = ctx.extras.get("gate") or PermissionGate(team.config.permission_mode, ctx.ask)
        self.session = None
        self.iterations = 0
        self.out_of_time = False

    def run(self) -> dict:
        started_at, clock = utc_now(), time.monotonic()
        brief = self.prepare()
        self.status(
            "started", f"started: {self.spec.objective[:200]}", objective=self.spec.objective
        )
        ended_because, reason = self.work(brief)
        result = read_result(self.workspace, self.agent_id) or self.record_failure(
            ended_because, reason
        )
        elapsed = round(time.monotonic() - clock, 3)
        outcome = {
            "task_id": self.spec.task_id,
            **result,
            "session_id": self.session.id,
            "result_path": f".lmagent/agents/{self.agent_id}/result.json",
            "started_at": started_at,
            "finished_at": utc_now(),
            "elapsed_s": elapsed,
            "artifact_check": check_artifacts(self.workspace, result.get("artifacts") or []),
        }
        said = result.get("summary") if result["status"] in OK_STATUSES else result.get("error")
        self.status(
            "finished",
            f"finished: {result['status']} after {result['iterations']} iterations, "
            f"{elapsed:.1f} s — {str(said or '')[:200]}",
            status=result["status"],
            ended_because=result.get("ended_because"),
            iterations=result["iterations"],
            elapsed_s=elapsed,
        )
        return outcome

    def prepare(self) -> dict:
        """Create the child's session and write its brief (before anything runs)."""
        parent = self.ctx.session
        self.session = SessionStore(self.workspace).create(
            self.spec.objective, parent_id=parent.id, source="sub-agent", mode=self.gate.mode
        )
        brief = make_brief(
            self.spec,
            agent_id=self.agent_id,
            parent_id=parent.id,
            depth=self.depth,
            max_depth=self.team.config.agent_max_depth,
            session_id=self.session.id,
            parent_objective=str(parent.meta.get("task") or ""),
            dependencies=dependency_results(
                self.workspace, self.dependencies, self.team.settings.dependency_budget
            ),
        )
        write_brief(self.workspace, brief)
        return brief

    def work(self, brief: dict) -> tuple[str, str]:
        """Run the child, reminding it once to report; (ended_because, reason)."""
        budget = self.team.settings.time_budget
        timer = threading.Timer(budget, self.time_is_up)
        timer.daemon = True
        timer.start()
        try:
            run = self.run_loop(brief_prompt(brief), self.team.settings.max_iterations)
            if self.reported():
                return "reported", ""
            if run.status in (STATUS_COMPLETED, STATUS_BLOCKED, STATUS_WAITING):
                run = self.run_loop(REMINDER, REMINDER_ITERATIONS)
                if self.reported():
                    return "reported", ""
            return self.why_unreported(run)
        except Exception as exc:  # the parent must get a result whatever happened
            return "crashed", f"the sub-agent crashed: {type(exc).__name__}: {exc}"
        finally:
            timer.cancel()

    def run_loop(self, task: str, max_iterations: int) -> RunResult:
        run = run_agent(
            self.team.config,
            task,
            session=self.session,
            sink=self.forward,
            gate=self.gate,
            stop=self.stop,
            toolset=self.team.toolset(self.depth, is_child=True),
            services=self.ctx.services,
            client=self.client(),
            source="sub-agent",
            parent_id=self.ctx.session.id,
            depth=self.depth,
            agent_id=self.agent_id,
            max_iterations=max_iterations,
            context_length=self.team.context_length,
        )
        self.iterations += run.iterations
        return run

    def client(self) -> LLMClient:
        """A client of its own (runs are concurrent) that knows what the server rejected."""
        parent = self.ctx.extras.get("client")
        client = LLMClient(self.team.config, model=getattr(parent, "model", None))
        client.dropped_params |= set(getattr(parent, "dropped_params", ()))
        client.tool_mode = getattr(parent, "tool_mode", client.tool_mode)
        return client

    def reported(self) -> bool:
        return read_result(self.workspace, self.agent_id) is not None

    def time_is_up(self) -> None:
        self.out_of_time = True
        self.stop.stop(f"time budget of {self.team.settings.time_budget:g} s exceeded")

    def why_unreported(self, run: RunResult) -> tuple[str, str]:
        if self.out_of_time:
            budget = self.team.settings.time_budget
            return (
                "time_budget",
                f"the sub-agent used its {budget:g} s time budget without reporting",
            )
        if run.status == STATUS_INTERRUPTED:
            return "interrupted", f"the sub-agent was stopped before reporting ({run.message})"
        if run.status == STATUS_MAX_ITERATIONS:
            return "max_iterations", f"the sub-agent {run.message} without reporting"
        if run.status == STATUS_ERROR:
            return "error", f"the sub-agent failed: {run.message}"
        words = " ".join(run.message.split())[:500] or "(nothing)"
        return "no_report", f"the sub-agent ended without calling report_result; it said: {words}"

    def record_failure(self, ended_because: str, reason: str) -> dict:
        """result.json for a child that never reported: status error, no artifacts guessed."""
        result = make_result(
            self.agent_id,
            status="error",
            summary="The sub-agent did not report a result.",
            artifacts=[],
            data=None,
            error=reason,
            iterations=self.iterations,
            ended_because=ended_because,
        )
        write_result(self.workspace, result)
        return result

    def forward(self, event: dict) -> None:
        """A child's event (tagged with agent_id and depth by its loop) to the parent's sink,
        under the parent's session id; the child's own session id moves to agent_session_id."""
        agent_session = event.get("agent_session_id") or event.get("session_id")
        self.ctx.emit(
            {**event, "session_id": self.ctx.session.id, "agent_session_id": agent_session}
        )

    def status(self, phase: str, message: str, **data) -> None:
        event = {
            "type": "status",
            "session_id": self.ctx.session.id,
            "agent_id": self.agent_id,
            "agent_session_id": self.session.id,
            "depth": self.depth,
            "phase": phase,
            "message": message,
            **data,
        }
        if self.spec.task_id:
            event["task_id"] = self.spec.task_id
        self.ctx.emit(event)
