"""The execution loop every front end shares.

A step is: maybe compact, query the model, then either run the tool calls or decide whether the
reply ends the run. How a run ends is expressed by small exceptions (lmagent/loop/endings.py);
the transcript is durable after every message, so a crash still leaves a resumable session.
What the model is told and how its plain replies are read lives in lmagent/loop/prompts.py; the
rules for small models beside the loop (lmagent/loop/policy.py names them): repeats.py for a
reply that repeats an earlier one, finish.py for a reply without tool calls.
"""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from lmagent.checkpoints.recorder import StepRecorder
from lmagent.core.config import Config
from lmagent.core.status import STATUS_ERROR, STATUS_RUNNING
from lmagent.core.stop import StopToken
from lmagent.core.workspace import Workspace
from lmagent.llm.client import (
    ContextOverflow,
    LLMClient,
    LLMError,
    LLMStopped,
    LLMTimeout,
    LLMUnreachable,
    Reply,
)
from lmagent.loop.attempts import Attempts
from lmagent.loop.calls import CallRunner, ReplyCalls
from lmagent.loop.checks import WorkChecks, changes_git, next_for_small_model
from lmagent.loop.conversation import Conversation
from lmagent.loop.endings import (
    Completed,
    Failed,
    Interrupted,
    LimitsExceeded,
    RunEnded,
    Stuck,
)
from lmagent.loop.finish import Done, Finish
from lmagent.loop.guards import NoProgress
from lmagent.loop.harness import HarnessTools
from lmagent.loop.history import (
    assistant_message,
    output_chars,
    repair_history,
)
from lmagent.loop.intake import ReplyIntake
from lmagent.loop.named import (
    changed_files_message,
    named_files_message,
    not_in_workspace,
)
from lmagent.loop.outcome import Outcome
from lmagent.loop.parsing import ReplyParser
from lmagent.loop.permissions import PermissionGate
from lmagent.loop.policy import RULES, Nudges
from lmagent.loop.prompts import (
    COMPLETE_LINE,
    PLAN_APPROVED,
    PLAN_REQUEST,
    final_text,
    parse_plan,
    parse_wait,
    resume_message,
    system_prompt,
)
from lmagent.loop.repeats import RESAMPLES, UNSTICK_TEMPERATURE, Repeats
from lmagent.loop.restarts import AttemptUndo
from lmagent.sessions.store import Session, SessionStore, disk_full, disk_full_message
from lmagent.sessions.waiting import record_ending
from lmagent.tools.processes import stop_run_processes
from lmagent.tools.registry import (
    Services,
    ToolContext,
    Toolset,
)
from lmagent.tools.toolset import build_toolset

__all__ = [
    "RESAMPLES",
    "RULES",
    "UNSTICK_TEMPERATURE",
    "RunResult",
    "parse_plan",
    "parse_wait",
    "resume_message",
    "run_agent",
    "system_prompt",
]

NO_PROGRESS_STEPS = 6  # steps in a row that achieve nothing end the run (0: never)
Sink = Callable[[dict], None]


@dataclass
class RunResult:
    status: str
    session_id: str
    message: str = ""
    iterations: int = 0
    tokens: int = 0
    wait_until: str | None = None
    extra: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- the run


class AgentRun:
    """One run of the loop over one session."""

    def __init__(
        self,
        config: Config,
        session: Session,
        *,
        sink: Sink | None = None,
        gate: PermissionGate | None = None,
        stop: StopToken | None = None,
        toolset: Toolset | None = None,
        services: Services | None = None,
        client: LLMClient | None = None,
        depth: int = 0,
        agent_id: str = "main",
        max_iterations: int | None = None,
        context_length: int | None = None,
        rules: frozenset[str] = RULES,
        no_progress_steps: int = NO_PROGRESS_STEPS,
    ):
        self.config = config
        self.session = session
        self.sink = sink or (lambda event: None)
        self.gate = gate or PermissionGate(config.permission_mode)
        self.stop = stop or StopToken()
        self.services = services or Services(config)
        self.toolset = toolset or build_toolset(self.services)
        self.client = client or LLMClient(config)
        self.depth = depth
        self.agent_id = agent_id
        self.max_iterations = max_iterations or config.max_iterations
        self.iterations = 0
        self.earlier_iterations = int(session.meta.get("iterations") or 0)  # resumed: > 0
        self.checkpoints = StepRecorder(
            config.workspace, session.id, agent_id, self.say, config.checkpoint_max_mb
        )
        self.ctx = self.tool_context()
        self.harness = HarnessTools(self.toolset, self.ctx, self.gate, self.checkpoints, self.say)
        task = str(session.meta.get("task") or "")
        look = self.harness.look
        self.parser = ReplyParser(config, self.client, self.toolset, look, self.say, task)
        self.checks = WorkChecks()  # what the model changed and has not looked at
        self.outcome = Outcome()  # what this run did, for its ending
        self.git_changes = 0  # git commands that changed the repository (no file): files()
        self.progress = NoProgress(no_progress_steps or self.max_iterations + 1)
        self.rules = _known(rules)  # the small-model rules applied (lmagent.loop.policy)
        self.nudges, self.repeats, self.attempts, self.finishing = self.small_model_rules()
        self.undo = AttemptUndo(
            config.workspace, session, self.ctx, self.checkpoints, self.attempts, self.say
        )
        records = (self.checks, self.outcome)
        self.calls = CallRunner(self.harness, records, self.emit, self.next_step)
        self.reply_calls = ReplyCalls(
            self.calls,
            output_chars(context_length),
            self.finishing.call_succeeded,
            lambda: self.text_calls,
        )
        self.intake = ReplyIntake(
            config, self.parser, self.nudges, session.append, lambda: self.text_calls, self.rules
        )
        self.conversation = self.new_conversation(context_length)

    def new_conversation(self, context_length: int | None) -> Conversation:
        """The exchange with the model; a reply in text form is read up to its first action
        (rule one_action)."""
        enough = self.parser.action_end if "one_action" in self.rules else None
        return Conversation(
            self.client,
            self.toolset,
            self.ctx,
            self.emit,
            self.rules,
            context_length,
            self.kept,
            enough,
        )

    def small_model_rules(self) -> tuple[Nudges, Repeats, Attempts, Finish]:
        """The rules beside the loop (lmagent.loop.policy names them): the nudges they speak
        with, a reply repeating an earlier one, an attempt begun again, a reply without tool
        calls."""
        nudges = Nudges(self.say, self.session.append)
        repeats = Repeats(
            self.rules,
            nudges,
            self.config.llm_temperature,
            lambda: self.text_calls,
            self.files,
            self.parser.text_calls_in,
        )
        attempts = Attempts(self.rules, repeats.small)
        harness = self.harness
        finishing = Finish(self.rules, nudges, self.checks, harness.shell, harness.look, attempts)
        return nudges, repeats, attempts, finishing

    def tool_context(self) -> ToolContext:
        """What the run's tools see of it."""
        return ToolContext(
            config=self.config,
            workspace=Workspace(self.config.workspace),
            session=self.session,
            services=self.services,
            stop=self.stop,
            emit=self.sink,
            ask=self.gate.ask,
            depth=self.depth,
            agent_id=self.agent_id,
            extras={"gate": self.gate, "client": self.client},
        )

    # ------------------------------------------------------------------ events

    def say(self, text: str) -> None:
        """A status line for the front ends."""
        self.emit("status", message=text)

    def emit(self, kind: str, **data) -> None:
        event = {"type": kind, "session_id": self.session.id, **data}
        if self.depth:
            event.update(agent_id=self.agent_id, depth=self.depth)
        self.sink(event)

    # ------------------------------------------------------------------ driving

    def run(self, plan_first: bool = False) -> RunResult:
        try:
            self.session.save_meta(status=STATUS_RUNNING, wait_until=None, error=None)
            self.index_wait(STATUS_RUNNING, None)  # resumed early: its wake-up is void
            not_here = self.parser.asks.not_here
            if not_here and not self.depth:  # perhaps the wrong folder: say which
                self.say(not_in_workspace(not_here, self.config.workspace))
            if plan_first:
                self.make_plan()
            while True:
                self.step()
        except RunEnded as exc:
            ended = self.undo.closest_left(exc)
        except LLMStopped as exc:
            ended = Interrupted(str(exc) or "stopped")
        except LLMTimeout as exc:
            ended = Failed(f"{exc}; a slow model may need a larger LLM_TIMEOUT", timed_out=True)
        except LLMUnreachable as exc:
            ended = Failed(str(exc), unreachable=True)
        except ContextOverflow as exc:
            ended = Failed(f"the conversation does not fit the model's context: {exc}")
        except LLMError as exc:
            ended = Failed(f"LLM request failed: {exc}")
        except KeyboardInterrupt:
            ended = Interrupted("interrupted")
        except Exception as exc:  # a bug or a full disk must still leave the session resumable
            ended = _failure(exc, self.session.id)
        return self.finish(ended)

    def finish(self, ended: RunEnded) -> RunResult:
        meta = _ending_meta(ended)
        stopped = stop_run_processes(self.ctx)  # the background processes this run started
        try:
            self.session.save_meta(
                **meta, stopped_processes=stopped, did=self.outcome.summary(ended.status)
            )
        except OSError as exc:  # not even written in place: the session is resumable as it is
            ended = _failure(exc, self.session.id)
            meta = _ending_meta(ended)
        self.index_wait(ended.status, meta["wait_until"], meta["wait_reason"] or ended.message)
        result = RunResult(
            status=ended.status,
            session_id=self.session.id,
            message=ended.message,
            iterations=self.iterations,
            tokens=self.conversation.tokens,
            wait_until=meta["wait_until"],
            extra=ended.extra,
        )
        if ended.status == STATUS_ERROR:
            self.emit("error", message=ended.message)
        self.emit(
            "done",
            status=result.status,
            message=result.message,
            iterations=result.iterations,
            tokens=result.tokens,
            wait_until=result.wait_until,
            stopped_processes=stopped,
            **self.outcome.fields(result.status),
        )
        return result

    def index_wait(self, status: str, wait_until: str | None, reason: str = "") -> None:
        """Keep the workspace's waiting index in step with this session, so a scheduler
        (in any process) wakes it on time; sub-agents' waits are their parent's business."""
        if self.depth:
            return
        with contextlib.suppress(OSError):  # the index is a hint; the session stays the truth
            extra = {"reason": reason, "mode": self.gate.mode} if wait_until else {}
            record_ending(self.config.workspace, self.session.id, status, wait_until, **extra)

    def check_limits(self) -> None:
        if self.stop.stopped:
            raise Interrupted(self.stop.reason or "stopped")
        if self.iterations >= self.max_iterations:
            raise LimitsExceeded(f"reached the limit of {self.max_iterations} iterations")

    def count_iteration(self) -> None:
        self.check_limits()
        self.iterations += 1
        self.session.meta["iterations"] = self.session.meta.get("iterations", 0) + 1
        self.emit("iteration", n=self.iterations, max=self.max_iterations)

    def step(self) -> None:
        self.conversation.new_step()
        self.count_iteration()
        self.conversation.compact_if_needed()
        answering = self.conversation.reply_rule() == "answer"
        self.attempts.begin(len(self.session.history), self.session.revision, self.undo.steps_taken)
        reply = self.repeats.resampled(
            self.query(unlike=self.repeats.unlike()),
            self.reply_again,
            self.attempts.stalled_by_repeat,
        )
        said, before = self.repeats.notice(reply), self.files()
        self.reply_calls.new_step()
        self.nudges.problem = ""
        repeat, changes = self.repeats.unstick, self.calls.changes
        try:
            self.take(reply, answering)
        except Stuck as stuck:
            self.begin_again_or_end(stuck)
            return
        finally:  # what it did, for a repeat of it to be known
            self.repeats.remember(said, before, self.calls.ran, self.reply_calls.error)
        if self.attempts.due() and self.undo.start_again(self.afresh):
            return
        self.count_progress(
            self.calls.changes > changes or (self.reply_calls.step_ok and not repeat)
        )

    def begin_again_or_end(self, stuck: Stuck) -> None:
        """An attempt that goes nowhere while the run's check fails is begun again, while one
        may be (lmagent.loop.attempts); otherwise the run ends blocked. The 1.5B model's new
        attempt ran its module five times, and the run ended with half its time left."""
        if not (self.attempts.stuck() and self.undo.start_again(self.afresh, stuck.message)):
            raise stuck

    def afresh(self) -> None:
        """What the run forgets of an attempt undone when the task is begun again
        (lmagent.loop.restarts): its finishing nudges, unchecked changes, idle steps."""
        self.finishing.new_attempt()
        self.calls.forget_loops()
        self.checks.clear()
        self.nudges.forgive()
        self.progress.idle = 0

    def count_progress(self, progressed: bool) -> None:
        """End the run (blocked) after steps in a row that changed nothing and ran nothing new
        that worked (lmagent.loop.guards.NoProgress)."""
        ending = self.progress.record(progressed, self.reply_calls.error or self.nudges.problem)
        if ending:
            self.begin_again_or_end(Stuck(ending))

    def kept(self) -> str:
        """For a small model (calling tools as text), what a compaction's summary keeps: the
        files this run changed, as they are now (lmagent.loop.named)."""
        return (
            changed_files_message(self.outcome.files, self.harness.look) if self.text_calls else ""
        )

    def files(self) -> str:
        """The workspace's files as the last checkpoint saw them (its tree), or, without
        checkpoints, how many calls of this run changed them: a model that writes A, then B,
        then A again into hello.py, running it each time, finds it as it was (a loop). With
        the git commands that changed the repository: `git add` changes no file, but a commit
        after it is no repeat of the one that failed before it."""
        tree = self.checkpoints.tree or f"changes: {self.calls.changes}"
        return f"{tree} git: {self.git_changes}"

    def take(self, reply, answering: bool) -> None:
        """Act on the model's reply: run its calls, or decide what its answer means."""
        if _is_empty(reply) and self.client.native_tools:
            # some servers (llama-cpp-python's function calling) can only answer in text
            # when no tools are offered: ask once more without them before calling it empty
            self.say("empty reply; asking again without tool definitions")
            reply = self.query(tools=False)
        asked = self.intake.read(reply, answering)
        if asked is None:  # the model was told why it cannot be used
            return
        message, calls, native = asked
        if not calls:
            self.session.append(message)
            self.finishing.decide(reply.content, self.done())
            return
        if self.repeats.fails_again(reply, message):
            self.attempts.repeated()
            return
        self.nudges.forgive()
        self.reply_calls.run(message, calls, native)
        finished = COMPLETE_LINE.search(reply.content) and self.reply_calls.last_ok
        if (
            finished
            and self.saw_output(calls)
            and not self.finishing.finishes_unverified(self.done())
        ):
            raise Completed(final_text(reply.content))

    @property
    def text_calls(self) -> bool:
        """The model calls tools as text (a small one): fenced blocks are actions, and the
        checks and nudges written for small models apply."""
        return self.client.tool_form == "text"

    def done(self) -> Done:
        """What the run has done, for a finish to be judged by (lmagent.loop.finish)."""
        state = self.session.state
        return Done(
            text_calls=self.text_calls,
            acted=self.reply_calls.acted,
            resumed=bool(self.earlier_iterations),
            last_calls_ok=self.reply_calls.last_ok,
            changed=self.outcome.files,
            open_work=len(state.open_todos() or state.open_steps()),
            task=str(self.session.meta.get("task") or ""),
        )

    def saw_output(self, calls: list[dict]) -> bool:
        """Whether a reply that ends the task with calls can end it: with text calls (small
        models), not when it ran commands whose output it has not seen (it "finishes" with a
        command that printed an error, or an answer it never read)."""
        return not self.text_calls or all(c["name"] != "shell" for c in calls)

    def next_step(self, name: str, arguments, result: dict, ran_changes: bool) -> None:
        """For a model calling tools as text (a small one), what a call's result says to do
        next (lmagent.loop.checks)."""
        self.git_changes += changes_git(name, arguments, result)
        if self.text_calls:
            state = (self.finishing.verifier, self.checks, self.rules)
            next_for_small_model(name, arguments, result, ran_changes, *state)

    def show_named_files(self, task: str) -> None:
        """Before the first reply to a new task: the files and folders it names, as they are
        (lmagent.loop.named), and the commands it quotes, run (lmagent.loop.finish)."""
        self.parser.new_task(task)
        text = "named_files" in self.rules and named_files_message(task, self.harness.look)
        if text:
            self.session.append({"role": "user", "content": text, "note": "named files"})
            self.say("showed the model the files the task names")
        commands = self.finishing.before_start(task)
        if commands:
            self.session.append({"role": "user", "content": commands, "note": "task commands"})

    # ------------------------------------------------------------------ model

    def query(
        self, tools: bool = True, temperature: float | None = None, unlike: list[str] | None = None
    ) -> Reply:
        """One reply, at `temperature` or at the one the repeats rules choose; stopped early
        when it begins as one of `unlike` does (lmagent.loop.repeats)."""
        temperature = temperature or self.attempts.temperature() or self.repeats.next_temperature()
        return self.conversation.query(tools, temperature, unlike or [])

    def reply_again(self, temperature: float, unlike: list[str]) -> Reply:
        """Another reply to the same prompt than those `unlike`, sampled at `temperature`
        (stopped early when it begins as one of them does): a new step for the front ends,
        which end the streamed reply that was not taken."""
        self.emit("iteration", n=self.iterations, max=self.max_iterations)
        return self.conversation.query(True, temperature, unlike)

    # ------------------------------------------------------------------ endings

    def make_plan(self) -> None:
        """Ask for a numbered plan and for the user's approval before any tool runs."""
        self.session.append({"role": "user", "content": PLAN_REQUEST, "note": "plan"})
        self.count_iteration()
        reply = self.query(tools=False)
        self.session.append(assistant_message(reply, []))
        steps = parse_plan(reply.content) or [
            {"id": 1, "description": reply.content.strip()[:500], "status": "pending"}
        ]
        self.gate.approve_plan(steps)
        self.session.state.plan = steps
        self.session.save_state()
        self.session.append({"role": "user", "content": PLAN_APPROVED, "note": "plan"})


def _ending_meta(ended: RunEnded) -> dict:
    """The metadata a session's ending writes."""
    return {
        "status": ended.status,
        "last_message": ended.message[:2000],
        "error": ended.message if ended.status == STATUS_ERROR else None,
        "wait_until": ended.extra.get("wait_until"),
        "wait_reason": ended.extra.get("wait_reason"),
    }


def _failure(exc: Exception, session_id: str) -> Failed:
    """How a run that raised ends: a full disk is for the user to fix, anything else is a bug."""
    if disk_full(exc):
        return Failed(disk_full_message(exc, session_id), disk_full=True)
    return Failed(f"internal error: {type(exc).__name__}: {exc}", traceback=traceback.format_exc())


def _known(rules: frozenset[str]) -> frozenset[str]:
    """The rules a run is given, all of them named in lmagent.loop.policy.RULES."""
    unknown = set(rules) - RULES
    if unknown:
        raise ValueError(f"unknown small-model rules: {', '.join(sorted(unknown))}")
    return frozenset(rules)


def _is_empty(reply) -> bool:
    return not reply.tool_calls and not reply.content.strip()


# --------------------------------------------------------------------------- entry point


def open_session(
    config: Config,
    task: str | None,
    session_id: str | None = None,
    session: Session | None = None,
    tool_names: frozenset[str] = frozenset(),
    **create_options,
) -> tuple[Session, bool]:
    """(session, resumed): a new session holding `task`, or a saved one (given, or by id) with
    its cut-off calls repaired and the new task or a resume message appended. A session that
    has no message yet (its run was killed at once) starts with the task it was made for."""
    if session is None and not session_id:
        session = new_session(config, task, **create_options)
    elif session is None:
        session = SessionStore(config.workspace).open(session_id)
    else:
        session.refresh()  # another run may have added to it since the caller opened it
    resumed = bool(session.history)  # a caller may pass a session it has just created
    repair_history(session, tool_names)
    if task and task.strip():
        session.append({"role": "user", "content": task.strip()})
    elif resumed:  # the agent's words, shown as a note
        session.append({"role": "user", "content": resume_message(session), "note": "resume"})
    else:
        session.append({"role": "user", "content": session.meta["task"]})
    return session, resumed


def new_session(config: Config, task: str | None, **create_options) -> Session:
    """An empty new session for `task` (raises ValueError without one)."""
    if not task or not task.strip():
        raise ValueError("a task is needed to start a new session")
    return SessionStore(config.workspace).create(task.strip(), **create_options)


def run_agent(
    config: Config,
    task: str | None = None,
    *,
    session_id: str | None = None,
    session: Session | None = None,
    sink: Sink | None = None,
    ask: Callable[[str, dict], str] | None = None,
    gate: PermissionGate | None = None,
    stop: StopToken | None = None,
    toolset: Toolset | None = None,
    services: Services | None = None,
    client: LLMClient | None = None,
    plan_first: bool = False,
    source: str = "cli",
    parent_id: str | None = None,
    context_length: int | None = None,
    **run_options,
) -> RunResult:
    """Run (or resume) one task to its end. The same function serves every front end.

    The session's lock is held for the whole run. Raises SessionBusy when another run (any
    thread or process) holds it, SessionNotFound for an unknown `session_id`, ValueError
    without task or session."""
    Workspace(config.workspace).ensure()
    gate = gate or PermissionGate(config.permission_mode, ask)
    services = services or Services(config)
    toolset = toolset or build_toolset(services)
    store = SessionStore(config.workspace)
    create = {"parent_id": parent_id, "source": source, "mode": gate.mode}
    if session is None and not session_id:
        session = new_session(config, task, **create)
    with store.lock(session.id if session is not None else store.resolve(session_id)):
        names = frozenset(toolset.names())
        session, resumed = open_session(config, task, session_id, session, names, **create)
        run = AgentRun(
            config,
            session,
            sink=sink,
            gate=gate,
            stop=stop,
            toolset=toolset,
            services=services,
            client=client,
            context_length=context_length,
            **run_options,
        )
        run.emit(
            "session",
            task=session.meta.get("task"),
            resumed=resumed,
            mode=gate.mode,
            profile=run.client.profile,
        )
        if task and task.strip():
            run.show_named_files(task)
        for problem in session.problems:
            run.emit("status", message=f"warning: session {session.id}: {problem}")
        try:
            return run.run(plan_first=plan_first)
        finally:
            session.close()
