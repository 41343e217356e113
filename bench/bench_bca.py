"""Benchmark: four independent sub-agent tasks at concurrency 4 against concurrency 1.

A scripted OpenAI-compatible server answers every reply after 0.5 s, standing in for a local
model. The top-level agent makes one decompose call with 4 independent tasks and then a final
reply (2 replies); each child lists the workspace, writes its file, reads it back and reports
(4 replies). Both runs happen in the same process, one after the other.

    python -m bench.bench_bca        # prints the figures as JSON; exit 1 if the target is missed
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

from lmagent.core.config import Config
from lmagent.loop.permissions import PermissionGate
from lmagent.loop.run import run_agent
from lmagent.subagents.tools import agent_toolset
from lmagent.tools.registry import Services
from tests.scripted_llm import ScriptedLLM, text, tool_call

ROOT = Path(__file__).resolve().parent.parent

REPLY_DELAY = 0.5
TASKS = 4
TARGET_RATIO = 0.35
OBJECTIVE = re.compile(r"## Objective\n(.*?)\n\n## Deliverable", re.S)


def child_script(name: str) -> list[dict]:
    path = f"{name}.txt"
    return [
        tool_call("ls", {}),
        tool_call("write", {"path": path, "content": f"output of {name}\n"}),
        tool_call("read", {"path": path}),
        tool_call(
            "report_result", {"status": "ok", "summary": f"wrote {path}", "artifacts": [path]}
        ),
    ]


class Router:
    """Answers each request from the script of the agent that sent it (children overlap)."""

    def __init__(self, names: list[str]):
        manifest = {
            "tasks": [
                {"task_id": n, "objective": f"Write {n}.txt", "deliverable_path": f"{n}.txt"}
                for n in names
            ]
        }
        self.scripts = {
            None: deque(
                [tool_call("decompose", {"manifest_json": manifest}), text("TASK_COMPLETE")]
            )
        }
        self.scripts.update({f"Write {n}.txt": deque(child_script(n)) for n in names})
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> dict:
        first = next(m["content"] for m in body["messages"] if m["role"] == "user")
        match = OBJECTIVE.search(first)
        with self.lock:
            return self.scripts[match.group(1) if match else None].popleft()

    @property
    def turns(self) -> int:
        return sum(len(script) for script in self.scripts.values())


def scenario(concurrency: int) -> dict:
    names = [f"task{n}" for n in range(1, TASKS + 1)]
    with tempfile.TemporaryDirectory() as tmp, ScriptedLLM(delay=REPLY_DELAY) as llm:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        environ = {"WORKSPACE": str(workspace), "LLM_URL": llm.url, "PERMISSION_MODE": "auto"}
        config = Config.load(environ=environ, cwd=workspace).with_changes(
            sub_agent_concurrency=concurrency
        )
        router = Router(names)
        llm.add(*[router] * router.turns)
        services = Services(config)
        events: list[dict] = []

        def note(event: dict) -> None:
            events.append({**event, "at": time.perf_counter()})

        started = time.perf_counter()
        result = run_agent(
            config,
            "Write four files",
            sink=note,
            gate=PermissionGate("auto"),
            toolset=agent_toolset(config, services),
            services=services,
        )
        total = time.perf_counter() - started
        llm.assert_all_used()
        top = [e for e in events if "agent_id" not in e and e["type"].startswith("tool_")]
        call = next(e for e in top if e["type"] == "tool_call" and e["name"] == "decompose")
        done = next(e for e in top if e["type"] == "tool_result" and e["name"] == "decompose")
        return {
            "concurrency": concurrency,
            "status": result.status,
            "all_tasks_ok": done["result"]["counts"] == {"ok": TASKS},
            "requests": len(llm.requests),
            "total_s": round(total, 3),
            "decompose_s": round(done["at"] - call["at"], 3),
        }


def run() -> dict:
    from bench.common import at_most, figure, result

    one = scenario(1)
    four = scenario(4)
    ratio = four["total_s"] / one["total_s"]
    all_ok = one["all_tasks_ok"] and four["all_tasks_ok"]
    figures = [
        figure("total, concurrency 1", round(one["total_s"], 2), "s"),
        figure("total, concurrency 4", round(four["total_s"], 2), "s"),
        at_most("ratio concurrency 4 / concurrency 1", round(ratio, 3), "×", TARGET_RATIO),
        figure(
            "ratio of the decompose call alone",
            round(four["decompose_s"] / one["decompose_s"], 3),
            "×",
        ),
        figure("ideal ratio for this scenario", round((2 + 4) / (2 + 4 * TASKS), 3), "×"),
        figure("every task reported ok", int(all_ok), "", "= 1", all_ok),
    ]
    notes = (
        f"{TASKS} independent tasks through one decompose call; every reply of the scripted "
        f"server takes {REPLY_DELAY} s; the parent makes 2 replies and each child 4 (ls, write, "
        "read, report_result). Both runs in the same process, one after the other. The ideal "
        "whole-run ratio is (2 + 4) / (2 + 4 × 4) = 0.333."
    )
    return result("bca", figures, notes, title="parallel sub-agents")


if __name__ == "__main__":
    outcome = run()
    print(json.dumps(outcome, indent=2))
    sys.exit(0 if all(f["met"] is not False for f in outcome["figures"]) else 1)
