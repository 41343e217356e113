"""Sub-agents (delegate, decompose, report_result) driven through the real loop and the
scripted OpenAI-compatible server. Children run concurrently, so scenarios with parallel
children route each request to the script of the agent that sent it (see `Agents`)."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections import deque
from datetime import datetime

import pytest

from lmagent.core.stop import StopToken
from lmagent.core.workspace import Workspace
from lmagent.loop.permissions import PermissionGate
from lmagent.loop.run import run_agent
from lmagent.sessions.store import SessionStore
from lmagent.subagents.manifest import MAX_TASKS, ManifestError, parse_manifest
from lmagent.subagents.run import REMINDER, BcaSettings
from lmagent.subagents.tools import agent_toolset
from lmagent.tools.registry import Services
from tests.conftest import make_config, tool_context
from tests.scripted_llm import text, tool_call

BRIEF_FIELDS = {
    "agent_id",
    "parent_id",
    "depth",
    "max_depth",
    "session_id",
    "objective",
    "deliverable",
    "data",
    "constraints",
    "parent_objective",
    "created_at",
}
RESULT_FIELDS = {
    "version",
    "agent_id",
    "status",
    "summary",
    "artifacts",
    "data",
    "error",
    "iterations",
    "created_at",
    "ended_because",
}
CHILD_TASK = re.compile(r"## Objective\n(.*?)\n\n## Deliverable", re.S)


# --------------------------------------------------------------------------- helpers


def first_user(body: dict) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def objective_of(body: dict) -> str | None:
    """The objective of the child that sent this request; None for the top-level agent."""
    match = CHILD_TASK.search(first_user(body))
    return match.group(1) if match else None


class Agents:
    """A callable turn that answers each request from the script of the agent that sent it:
    `parent` for the top-level agent, otherwise the child whose brief has that objective.
    A scripted turn may itself be a callable `body -> turn`."""

    def __init__(self, parent: list, **children: list):
        self.scripts = {None: deque(parent)}
        self.scripts.update({objective: deque(turns) for objective, turns in children.items()})
        self.total = sum(len(turns) for turns in self.scripts.values())
        self.bodies: dict[str | None, list[dict]] = {key: [] for key in self.scripts}
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> dict:
        who = objective_of(body)
        with self.lock:
            self.bodies[who].append(body)
            turn = self.scripts[who].popleft()
        return turn(body) if callable(turn) else turn

    def install(self, llm) -> Agents:
        llm.add(*[self] * self.total)
        return self

    def assert_done(self, llm) -> None:
        llm.assert_all_used()
        assert {k: list(v) for k, v in self.scripts.items() if v} == {}


def run_parent(config, task, *, gate=None, stop=None):
    events: list[dict] = []
    services = Services(config)
    toolset = agent_toolset(config, services)
    result = run_agent(
        config,
        task,
        sink=events.append,
        gate=gate or PermissionGate(config.permission_mode),
        stop=stop,
        toolset=toolset,
        services=services,
    )
    return result, events


def tool_results(llm, name: str) -> list[dict]:
    """Results of `name` calls as the top-level agent saw them, in order."""
    found = []
    for body in llm.requests:
        if objective_of(body) is not None:
            continue
        calls = {
            c["id"]: c["function"]["name"]
            for m in body["messages"]
            for c in m.get("tool_calls") or ()
        }
        for m in body["messages"]:
            if m["role"] == "tool" and calls.get(m["tool_call_id"]) == name:
                found.append(json.loads(m["content"]))
    unique = []
    for result in found:
        if result not in unique:
            unique.append(result)
    return unique


def agent_files(workspace, agent_id: str) -> tuple[dict, dict]:
    directory = workspace / ".lmagent" / "agents" / agent_id
    brief = json.loads((directory / "brief.json").read_text())
    result = json.loads((directory / "result.json").read_text())
    return brief, result


def phases(events: list[dict]) -> list[tuple]:
    return [
        (e.get("task_id") or e.get("agent_id"), e["phase"])
        for e in events
        if e["type"] == "status" and "phase" in e
    ]


def stamp(value: str) -> datetime:
    return datetime.fromisoformat(value)


def write_and_report(path: str, content: str, summary: str = "done") -> list[dict]:
    return [
        tool_call("write", {"path": path, "content": content}),
        tool_call("report_result", {"status": "ok", "summary": summary, "artifacts": [path]}),
    ]


DELEGATE_HELLO = {
    "objective": "Write hello.txt with a greeting",
    "deliverable_type": "file",
    "deliverable_description": "a one-line greeting file",
    "deliverable_path": "hello.txt",
    "deliverable_format": "plain text",
    "constraints": ["one line only"],
    "data_hint": "the greeting is 'hello world'",
}


def delegate_hello(config, llm):
    llm.add(
        tool_call("delegate", DELEGATE_HELLO),
        *write_and_report("hello.txt", "hello world\n", "Wrote hello.txt"),
        text("The greeting is written.\nTASK_COMPLETE"),
    )
    result, events = run_parent(config, "Make a greeting file")
    llm.assert_all_used()
    return result, events, tool_results(llm, "delegate")[0]


# --------------------------------------------------------------------------- delegate


def test_delegate_produces_a_file_and_reports_it(config, llm, workspace):
    result, events, delegated = delegate_hello(config, llm)

    assert result.status == "completed"
    assert (workspace / "hello.txt").read_text() == "hello world\n"
    assert delegated["success"] is True
    assert delegated["status"] == "ok"
    assert delegated["summary"] == "Wrote hello.txt"
    assert delegated["artifacts"] == ["hello.txt"]
    assert delegated["ended_because"] == "reported"
    assert delegated["artifact_check"] == [
        {
            "path": "hello.txt",
            "inside_workspace": True,
            "exists": True,
            "non_empty": True,
            "bytes": 12,
            "ok": True,
        }
    ]
    agent_id = delegated["agent_id"]
    assert delegated["result_path"] == f".lmagent/agents/{agent_id}/result.json"

    # the child ran the same loop in its own session, tagged in every event it sent
    child = SessionStore(workspace).open(delegated["session_id"])
    assert child.meta["parent_id"] == result.session_id
    assert child.meta["source"] == "sub-agent"
    assert child.meta["task"] == DELEGATE_HELLO["objective"]
    # every event reaches the front end under the run's session, the child's tagged with its
    # agent id, depth and own session
    assert {e["session_id"] for e in events} == {result.session_id}
    child_events = [e for e in events if e.get("agent_id") == agent_id]
    assert {e["depth"] for e in child_events} == {1}
    assert {e["agent_session_id"] for e in child_events} == {child.id}
    assert [e["name"] for e in child_events if e["type"] == "tool_call"] == [
        "write",
        "report_result",
    ]
    assert child_events[0]["phase"] == "started"
    child_done = next(e for e in child_events if e["type"] == "done")
    assert child_done["status"] == "completed"
    assert phases(events) == [(agent_id, "started"), (agent_id, "finished")]
    finished = next(e for e in child_events if e.get("phase") == "finished")
    assert (finished["status"], finished["iterations"]) == ("ok", 2)
    assert events.index(child_done) < events.index(finished)
    assert [e for e in events if e["type"] == "done"][-1] == events[-1]
    assert "agent_id" not in events[-1]


def test_brief_and_result_files_field_by_field(config, llm, workspace):
    result, _, delegated = delegate_hello(config, llm)
    brief, written = agent_files(workspace, delegated["agent_id"])

    assert set(brief) == BRIEF_FIELDS
    assert brief["agent_id"] == delegated["agent_id"]
    assert brief["parent_id"] == result.session_id
    assert brief["depth"] == 1
    assert brief["max_depth"] == config.agent_max_depth == 3
    assert brief["session_id"] == delegated["session_id"]
    assert brief["objective"] == "Write hello.txt with a greeting"
    assert brief["deliverable"] == {
        "type": "file",
        "description": "a one-line greeting file",
        "path": "hello.txt",
        "paths": ["hello.txt"],
        "format": "plain text",
    }
    assert brief["data"] == {"hint": "the greeting is 'hello world'", "dependencies": []}
    assert brief["constraints"] == ["one line only"]
    assert brief["parent_objective"] == "Make a greeting file"
    assert stamp(brief["created_at"]) <= stamp(written["created_at"])

    assert set(written) == RESULT_FIELDS
    assert written["version"] == 1
    assert written["agent_id"] == delegated["agent_id"]
    assert written["status"] == "ok"
    assert written["summary"] == "Wrote hello.txt"
    assert written["artifacts"] == ["hello.txt"]
    assert written["data"] is None
    assert written["error"] is None
    assert written["iterations"] == 2
    assert written["ended_because"] == "reported"
    # the parent's tool result is that file plus the checks
    assert {k: delegated[k] for k in RESULT_FIELDS} == written

    # the child's task is the brief in the fixed template, nothing of the parent's chat
    prompt = first_user(llm.requests[1])
    assert prompt.startswith(f"You are sub-agent {brief['agent_id']} (depth 1 of at most 3)")
    for part in ("hello world", "one line only", "path(s): hello.txt", "format: plain text"):
        assert part in prompt
    assert [m["role"] for m in llm.requests[1]["messages"]] == ["system", "user"]


def test_child_that_never_reports_gets_an_error_result_without_guessed_artifacts(
    config, llm, workspace
):
    llm.add(
        tool_call("delegate", DELEGATE_HELLO),
        tool_call("write", {"path": "hello.txt", "content": "hello world\n"}),
        text("All done.\nTASK_COMPLETE"),
        text("I finished the greeting.\nTASK_COMPLETE"),  # answer to the one reminder
        text("The sub-agent failed.\nTASK_COMPLETE"),
    )
    result, _ = run_parent(config, "Make a greeting file")
    llm.assert_all_used()
    delegated = tool_results(llm, "delegate")[0]
    _, written = agent_files(workspace, delegated["agent_id"])

    assert result.status == "completed"
    assert llm.requests[3]["messages"][-1] == {"role": "user", "content": REMINDER}
    assert written["status"] == "error"
    assert written["ended_because"] == "no_report"
    assert written["artifacts"] == []  # hello.txt exists, but was never claimed
    assert (workspace / "hello.txt").exists()
    assert "without calling report_result" in written["error"]
    assert "I finished the greeting." in written["error"]
    assert written["iterations"] == 3
    assert delegated["success"] is False
    assert delegated["error"] == written["error"]


def test_iteration_and_time_budgets_end_a_child_with_the_reason(config, llm, workspace):
    looping = [tool_call("ls", {}), tool_call("glob", {"pattern": "*"})]
    llm.add(
        tool_call("delegate", DELEGATE_HELLO),
        *looping,
        tool_call("delegate", {**DELEGATE_HELLO, "objective": "Write slowly"}),
        tool_call("ls", {}, delay=30),
        text("Both failed.\nTASK_COMPLETE"),
    )
    started = time.monotonic()
    budgets = config.with_changes(sub_agent_max_iterations=2, sub_agent_time_budget=1.0)
    result, _ = run_parent(budgets, "Make a greeting file")
    llm.assert_all_used()
    first, second = tool_results(llm, "delegate")

    assert result.status == "completed"
    assert time.monotonic() - started < 10
    assert (first["ended_because"], first["iterations"]) == ("max_iterations", 2)
    assert "2 iterations" in first["error"]
    assert second["ended_because"] == "time_budget"
    assert "time budget" in second["error"]
    assert first["status"] == second["status"] == "error"


def test_report_result_refuses_missing_artifacts_and_the_parent_sees_empty_ones(
    config, llm, workspace
):
    llm.add(
        tool_call("delegate", DELEGATE_HELLO),
        tool_call("report_result", {"status": "ok", "summary": "x", "artifacts": ["nope.txt"]}),
        tool_call("report_result", {"status": "ok", "summary": "x", "artifacts": ["../out"]}),
        tool_call("report_result", {"status": "ok", "summary": "x"}),
        tool_call("write", {"path": "hello.txt", "content": ""}),
        tool_call("report_result", {"status": "ok", "summary": "x", "artifacts": ["hello.txt"]}),
        text("Done.\nTASK_COMPLETE"),
    )
    run_parent(config, "Make a greeting file")
    llm.assert_all_used()
    refusals = [json.loads(llm.requests[i]["messages"][-1]["content"]) for i in (2, 3, 4)]
    assert [r["success"] for r in refusals] == [False, False, False]
    assert "'nope.txt' does not exist" in refusals[0]["error"]
    assert "outside the workspace" in refusals[1]["error"]
    assert "list the file(s) you produced" in refusals[2]["error"]
    delegated = tool_results(llm, "delegate")[0]
    assert delegated["success"] is True
    assert delegated["artifact_check"][0]["non_empty"] is False
    assert delegated["warning"] == "claimed artifacts failed the check: hello.txt (empty)"


# --------------------------------------------------------------------------- decompose


CSS = "body { color: teal; }\n"
HTML = '<link rel="stylesheet" href="style.css"><p>hi</p>\n'


def test_decompose_dependency_chain_gives_the_html_child_the_css_result(config, llm, workspace):
    manifest = {
        "tasks": [
            {
                "task_id": "css",
                "objective": "Write style.css",
                "depends_on": [],
                "deliverable_type": "file",
                "deliverable_path": "style.css",
            },
            {
                "task_id": "html",
                "objective": "Write index.html importing style.css",
                "depends_on": ["css"],
                "deliverable_path": "index.html",
            },
        ]
    }
    llm.add(
        tool_call("decompose", {"manifest_json": manifest}),
        *write_and_report("style.css", CSS, "Teal text colour in style.css"),
        *write_and_report("index.html", HTML, "index.html links style.css"),
        text("Site built.\nTASK_COMPLETE"),
    )
    result, events = run_parent(config, "Build a tiny site")
    llm.assert_all_used()
    decomposed = tool_results(llm, "decompose")[0]

    assert result.status == "completed"
    assert decomposed["success"] is True
    assert decomposed["counts"] == {"ok": 2}
    css, html = decomposed["tasks"]
    assert (css["task_id"], html["task_id"]) == ("css", "html")
    assert stamp(css["finished_at"]) <= stamp(html["started_at"])
    assert (workspace / "index.html").read_text() == HTML

    brief, _ = agent_files(workspace, html["agent_id"])
    assert brief["deliverable"]["type"] == "file"  # implied by deliverable_path
    assert brief["data"]["dependencies"] == [
        {
            "task_id": "css",
            "agent_id": css["agent_id"],
            "status": "ok",
            "summary": "Teal text colour in style.css",
            "artifacts": ["style.css"],
            "data": None,
            "contents": {"style.css": CSS},
            "not_included": [],
        }
    ]
    html_prompt = first_user(llm.requests[3])
    assert "Result of task 'css' (ok)" in html_prompt
    assert f"--- style.css ---\n{CSS}" in html_prompt
    assert phases(events) == [
        (css["task_id"], "started"),
        (css["task_id"], "finished"),
        (html["task_id"], "started"),
        (html["task_id"], "finished"),
    ]


def parallel_manifest(*names: str) -> str:
    """A manifest as a model might send it: a fenced JSON string with trailing commas."""
    tasks = ",".join(
        f'{{"task_id": "{n}", "objective": "Write {n}.txt", "depends_on": [],}}' for n in names
    )
    return f'```json\n{{"tasks": [{tasks},],}}\n```'


def meet(mine: threading.Event, other: threading.Event, turn: dict):
    """A turn that is answered only once the other child has sent a request too."""

    def answer(body):
        mine.set()
        turn["content"] = f"met: {other.wait(10)}"
        return turn

    return answer


def test_independent_tasks_run_at_the_same_time(config, llm, workspace):
    a_asked, b_asked = threading.Event(), threading.Event()
    agents = Agents(
        [
            tool_call("decompose", {"manifest_json": parallel_manifest("a", "b")}),
            text("TASK_COMPLETE"),
        ],
        **{
            "Write a.txt": [
                meet(a_asked, b_asked, tool_call("write", {"path": "a.txt", "content": "a"})),
                tool_call(
                    "report_result", {"status": "ok", "summary": "a", "artifacts": ["a.txt"]}
                ),
            ],
            "Write b.txt": [
                meet(b_asked, a_asked, tool_call("write", {"path": "b.txt", "content": "b"})),
                tool_call(
                    "report_result", {"status": "ok", "summary": "b", "artifacts": ["b.txt"]}
                ),
            ],
        },
    ).install(llm)
    run_parent(config, "Write two files")
    agents.assert_done(llm)
    a, b = tool_results(llm, "decompose")[0]["tasks"]

    assert (a["status"], b["status"]) == ("ok", "ok")
    assert stamp(a["started_at"]) < stamp(b["finished_at"])
    assert stamp(b["started_at"]) < stamp(a["finished_at"])
    met = [m["content"] for body in agents.bodies["Write a.txt"][1:] for m in body["messages"]]
    assert "met: True" in met


def test_concurrency_one_runs_independent_tasks_one_after_the_other(llm, workspace):
    config = make_config(workspace, llm, sub_agent_concurrency=1)
    Agents(
        [
            tool_call("decompose", {"manifest_json": parallel_manifest("a", "b")}),
            text("TASK_COMPLETE"),
        ],
        **{
            "Write a.txt": write_and_report("a.txt", "a"),
            "Write b.txt": write_and_report("b.txt", "b"),
        },
    ).install(llm)
    run_parent(config, "Write two files")
    a, b = sorted(tool_results(llm, "decompose")[0]["tasks"], key=lambda t: t["started_at"])
    assert stamp(a["finished_at"]) <= stamp(b["started_at"])


def test_failed_dependency_marks_its_dependants_skipped(config, llm, workspace):
    manifest = {
        "tasks": [
            {"task_id": "a", "objective": "Fetch the data", "depends_on": []},
            {"task_id": "b", "objective": "Chart the data", "depends_on": ["a"]},
            {"task_id": "c", "objective": "Publish the chart", "depends_on": ["b"]},
            {"task_id": "d", "objective": "Write the intro", "depends_on": []},
        ]
    }
    report = {"status": "error", "summary": "no data", "error": "the source is offline"}
    agents = Agents(
        [tool_call("decompose", {"manifest_json": manifest}), text("TASK_COMPLETE")],
        **{
            "Fetch the data": [tool_call("report_result", report)],
            "Write the intro": [
                tool_call("report_result", {"status": "ok", "summary": "intro", "data": "Hi"})
            ],
        },
    ).install(llm)
    result, events = run_parent(config, "Make a report")
    agents.assert_done(llm)
    decomposed = tool_results(llm, "decompose")[0]
    a, b, c, d = decomposed["tasks"]

    assert result.status == "completed"
    assert decomposed["success"] is False
    assert decomposed["counts"] == {"error": 1, "skipped": 2, "ok": 1}
    assert (a["status"], a["error"]) == ("error", "the source is offline")
    assert b == {
        "success": False,
        "task_id": "b",
        "status": "skipped",
        "reason": "depends on 'a', which ended with status error: the source is offline",
        "error": "depends on 'a', which ended with status error: the source is offline",
    }
    assert c["status"] == "skipped"
    assert c["reason"].startswith("depends on 'b', which ended with status skipped")
    assert (d["status"], d["data"]) == ("ok", "Hi")
    assert decomposed["error"].startswith("a: the source is offline; b: depends on 'a'")
    assert {p for p in phases(events) if p[1] == "skipped"} == {("b", "skipped"), ("c", "skipped")}
    agents_dir = workspace / ".lmagent" / "agents"
    assert sorted(p.name.split("-")[0] for p in agents_dir.iterdir()) == ["a", "d"]


def test_invalid_manifest_is_refused_with_fixable_errors_then_accepted(config, llm, workspace):
    cyclic = {
        "tasks": [
            {"task_id": "a", "objective": "A", "depends_on": ["b"]},
            {"task_id": "b", "objective": "B", "depends_on": ["a"]},
        ]
    }
    Agents(
        [
            tool_call("decompose", {"manifest_json": cyclic}),
            tool_call("decompose", {"manifest_json": parallel_manifest("a")}),
            text("TASK_COMPLETE"),
        ],
        **{"Write a.txt": write_and_report("a.txt", "a")},
    ).install(llm)
    run_parent(config, "Write a file")
    refused, accepted = tool_results(llm, "decompose")
    assert refused["success"] is False
    assert "the dependencies form a cycle: a → b → a" in refused["error"]
    assert accepted["success"] is True
    assert [p.name[:2] for p in (workspace / ".lmagent" / "agents").iterdir()] == ["a-"]


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        ({"tasks": []}, "the manifest has no tasks"),
        (
            {"tasks": [{"task_id": str(i), "objective": "o"} for i in range(MAX_TASKS + 1)]},
            f"the manifest has {MAX_TASKS + 1} tasks; at most {MAX_TASKS} are allowed",
        ),
        (
            {"tasks": [{"task_id": "a", "objective": "o"}, {"task_id": "a", "objective": "p"}]},
            "task_id 'a' is used more than once",
        ),
        (
            {"tasks": [{"task_id": "a", "objective": "o", "depends_on": ["z"]}]},
            "task 'a' depends on 'z', which is not a task_id in the manifest (known: a)",
        ),
        (
            {"tasks": [{"task_id": "a", "objective": "o", "depends_on": "a"}]},
            "task 'a' depends on itself",
        ),
        ({"tasks": [{"objective": "o"}]}, "task 1: task_id is missing"),
        ({"tasks": [{"task_id": "a"}]}, "task 'a': objective is missing"),
        (
            {"tasks": [{"task_id": "a", "objective": "o", "dependencies": ["b"]}]},
            "task 'a': unknown key(s) dependencies; allowed: task_id, objective, depends_on",
        ),
        (
            {"tasks": [{"task_id": "a", "objective": "o", "deliverable_type": "pdf"}]},
            "deliverable_type 'pdf' is not one of file, files, data, report",
        ),
        (
            {"tasks": [{"task_id": "a", "objective": "o", "deliverable_path": "../x"}]},
            "deliverable_path '../x' cannot be used",
        ),
        (
            {"tasks": [{"task_id": "a", "objective": "o", "deliverable_path": ".lmagent/x"}]},
            "the agent's own configuration",
        ),
        (
            {
                "tasks": [
                    {"task_id": "a", "objective": "o", "deliverable_path": "x.html"},
                    {"task_id": "b", "objective": "p", "deliverable_path": "x.html"},
                ]
            },
            "tasks 'a' and 'b' both deliver 'x.html' and may run at the same time",
        ),
        ('{"tasks": [', "manifest_json is not valid JSON"),
        ({"jobs": []}, 'the manifest must be an object with a "tasks" list'),
    ],
)
def test_manifest_validation_errors(workspace, manifest, message):
    with pytest.raises(ManifestError) as caught:
        parse_manifest(manifest, Workspace(workspace))
    assert message in str(caught.value)


def test_lenient_manifest_forms_are_accepted(workspace):
    ws = Workspace(workspace)
    fenced = parse_manifest(parallel_manifest("a", "b"), ws)
    assert [t.task_id for t in fenced] == ["a", "b"]
    listed = parse_manifest(
        [{"task_id": 1, "objective": "o"}, {"task_id": 2, "objective": "p", "depends_on": 1}], ws
    )
    assert [(t.task_id, t.depends_on) for t in listed] == [("1", ()), ("2", ("1",))]
    ticks = (
        "```\n" + json.dumps({"tasks": [{"task_id": "x", "objective": "has ``` inside"}]}) + "\n```"
    )
    assert parse_manifest(ticks, ws)[0].objective == "has ``` inside"


# --------------------------------------------------------------------------- depth


def offered(body: dict) -> set[str]:
    return {tool["function"]["name"] for tool in body.get("tools") or ()}


def test_depth_limit_hides_and_refuses_delegation(llm, workspace):
    config = make_config(workspace, llm, agent_max_depth=1)
    llm.add(
        tool_call("delegate", DELEGATE_HELLO),
        tool_call("delegate", {**DELEGATE_HELLO, "objective": "go deeper"}),
        tool_call("decompose", {"manifest_json": parallel_manifest("x")}),
        *write_and_report("hello.txt", "hello world\n"),
        tool_call("report_result", {"status": "ok", "summary": "not a sub-agent"}),
        text("TASK_COMPLETE"),
    )
    result, _ = run_parent(config, "Make a greeting file")
    llm.assert_all_used()

    parent_tools, child_tools = offered(llm.requests[0]), offered(llm.requests[1])
    assert {"delegate", "decompose"} <= parent_tools
    assert "report_result" not in parent_tools
    assert {"delegate", "decompose"}.isdisjoint(child_tools)
    assert "report_result" in child_tools
    refusals = [json.loads(llm.requests[i]["messages"][-1]["content"]) for i in (2, 3)]
    for refusal in refusals:
        assert refusal["success"] is False
        assert refusal["error"].startswith("unknown tool")
    assert len(list((workspace / ".lmagent" / "agents").iterdir())) == 1  # no grandchild
    not_offered = json.loads(llm.requests[6]["messages"][-1]["content"])
    assert not_offered["error"].startswith("unknown tool 'report_result'")
    assert result.status == "completed"


def test_toolsets_by_depth_and_setting(config, workspace):
    services = Services(config)
    names = lambda **kw: set(agent_toolset(config, services, **kw).names())  # noqa: E731
    assert {"delegate", "decompose"} <= names(depth=2) and "report_result" not in names(depth=2)
    assert {"delegate", "decompose"}.isdisjoint(names(depth=3, is_child=True))
    assert "report_result" in names(depth=3, is_child=True)
    disabled = config.with_changes(enable_sub_agents=False)
    assert {"delegate", "decompose"}.isdisjoint(agent_toolset(disabled, services).names())
    assert {"read", "write", "shell", "todo_add"} <= names()


def test_delegation_tools_refuse_to_run_beyond_the_depth_limit(config, workspace):
    """Second line of defence: even a tool set built for a shallower agent refuses."""
    services = Services(config)
    toolset = agent_toolset(config, services)
    ctx = tool_context(config, services=services, depth=config.agent_max_depth)
    for name, arguments in [("delegate", DELEGATE_HELLO), ("decompose", {"manifest_json": "{}"})]:
        refused = toolset.execute(ctx, name, arguments)
        assert refused == {
            "success": False,
            "error": f"{name} is not available at depth 3 (AGENT_MAX_DEPTH=3); "
            "do the work yourself",
        }
    assert not (workspace / ".lmagent" / "agents").exists()


def test_nested_delegation_with_one_slot_does_not_deadlock(llm, workspace):
    config = make_config(workspace, llm, sub_agent_concurrency=1, agent_max_depth=2)
    inner = {**DELEGATE_HELLO, "objective": "Write the greeting yourself"}
    llm.add(
        tool_call("delegate", {**DELEGATE_HELLO, "objective": "Organise the greeting"}),
        tool_call("delegate", inner),
        *write_and_report("hello.txt", "hello world\n"),
        tool_call(
            "report_result", {"status": "ok", "summary": "delegated", "artifacts": ["hello.txt"]}
        ),
        text("TASK_COMPLETE"),
    )
    result, events = run_parent(config, "Make a greeting file")
    llm.assert_all_used()
    assert result.status == "completed"
    assert "delegate" not in offered(llm.requests[2])  # the grandchild is at the limit
    assert {e["depth"] for e in events if e.get("phase") == "started"} == {1, 2}
    grandchild_writes = [e for e in events if e["type"] == "tool_call" and e["name"] == "write"]
    assert [e["depth"] for e in grandchild_writes] == [2]
    assert {e["session_id"] for e in events} == {result.session_id}
    grandchild = SessionStore(workspace).open(grandchild_writes[0]["agent_session_id"])
    assert grandchild.meta["parent_id"] != result.session_id  # its parent is the child


# --------------------------------------------------------------------------- permissions


def test_normal_mode_parent_is_asked_before_its_child_writes(llm, workspace):
    config = make_config(workspace, llm, permission_mode="normal")
    asked = []

    def ask(tool, arguments):
        asked.append((tool, arguments))
        return "deny"

    llm.add(
        tool_call("delegate", DELEGATE_HELLO),
        tool_call("write", {"path": "hello.txt", "content": "hello world\n"}),
        tool_call("report_result", {"status": "error", "summary": "write was denied"}),
        text("Could not write.\nTASK_COMPLETE"),
    )
    run_parent(config, "Make a greeting file", gate=PermissionGate("normal", ask))
    llm.assert_all_used()
    assert asked == [("write", {"path": "hello.txt", "content": "hello world\n"})]
    assert not (workspace / "hello.txt").exists()
    denied = json.loads(llm.requests[2]["messages"][-1]["content"])
    assert "denied permission for write" in denied["error"]
    delegated = tool_results(llm, "delegate")[0]
    assert (delegated["status"], delegated["error"]) == ("error", "write was denied")
    child = SessionStore(workspace).open(delegated["session_id"])
    assert child.meta["mode"] == "normal"


def test_an_auto_answer_to_a_child_holds_for_the_parent_too(llm, workspace):
    config = make_config(workspace, llm, permission_mode="normal")
    asked = []
    gate = PermissionGate("normal", lambda tool, args: asked.append(tool) or "auto")
    llm.add(
        tool_call("delegate", DELEGATE_HELLO),
        *write_and_report("hello.txt", "hello world\n"),
        tool_call("write", {"path": "bye.txt", "content": "bye"}),
        text("TASK_COMPLETE"),
    )
    run_parent(config, "Make greeting files", gate=gate)
    llm.assert_all_used()
    assert asked == ["write"]
    assert (workspace / "bye.txt").read_text() == "bye"


# --------------------------------------------------------------------------- stop


def test_stop_reaches_running_children(config, llm, workspace):
    manifest = {
        "tasks": [
            {"task_id": "a", "objective": "Slow task a", "depends_on": []},
            {"task_id": "b", "objective": "Slow task b", "depends_on": []},
            {"task_id": "c", "objective": "Summarise", "depends_on": ["a", "b"]},
        ]
    }
    Agents(
        [tool_call("decompose", {"manifest_json": manifest})],
        **{
            "Slow task a": [tool_call("ls", {}, delay=60)],
            "Slow task b": [tool_call("ls", {}, delay=60)],
        },
    ).install(llm)
    stop, outcome = StopToken(), {}
    runner = threading.Thread(
        target=lambda: outcome.update(run=run_parent(config, "Do slow work", stop=stop))
    )
    runner.start()
    llm.wait_for_requests(3, timeout=10)  # the parent and both children are waiting on the LLM
    stopped_at = time.monotonic()
    stop.stop("interrupted")
    runner.join(10)

    assert not runner.is_alive()
    assert time.monotonic() - stopped_at < 5
    result, events = outcome["run"]
    assert result.status == "interrupted"
    finished = {e["task_id"]: e for e in events if e.get("phase") == "finished"}
    assert {k: e["ended_because"] for k, e in finished.items()} == {
        "a": "interrupted",
        "b": "interrupted",
    }
    skipped = next(e for e in events if e.get("phase") == "skipped")
    assert (skipped["task_id"], skipped["reason"]) == ("c", "not started: interrupted")
    for event in finished.values():
        _, written = agent_files(workspace, event["agent_id"])
        assert (written["status"], written["ended_because"]) == ("error", "interrupted")
        assert (
            SessionStore(workspace).open(event["agent_session_id"]).meta["status"] == "interrupted"
        )


# --------------------------------------------------------------------------- clean-up


def test_cleanup_removes_only_old_finished_agent_dirs(config, workspace):
    agents_dir = workspace / ".lmagent" / "agents"
    old = time.time() - 10 * 86400
    for name, finished, when in [
        ("old-done", True, old),
        ("new-done", True, None),
        ("old-running", False, old),
    ]:
        (agents_dir / name).mkdir(parents=True)
        (agents_dir / name / "brief.json").write_text("{}")
        if finished:
            (agents_dir / name / "result.json").write_text('{"status": "ok"}')
        if when:
            for path in (agents_dir / name).iterdir():
                os.utime(path, (when, when))
    agent_toolset(config.with_changes(agent_dir_retention_days=7), Services(config))
    assert sorted(p.name for p in agents_dir.iterdir()) == ["new-done", "old-running"]
    agent_toolset(config, Services(config))  # the default keeps everything
    assert sorted(p.name for p in agents_dir.iterdir()) == ["new-done", "old-running"]


def test_settings_come_from_the_config(llm, workspace):
    config = make_config(workspace, llm, sub_agent_concurrency=3, max_iterations=10)
    settings = BcaSettings.from_config(config)
    assert (settings.concurrency, settings.max_iterations) == (3, 10)  # never above the run's cap
    assert (settings.time_budget, settings.retention_days) == (3600.0, 0.0)
