"""bench/bench_wait.py's split of the wait between two requests: the model's command, the
finish's checks and the harness, measured on a scripted run through the bench's own relay."""

from __future__ import annotations

from types import SimpleNamespace

from bench import bench_tasks, bench_wait
from tests.realmodel_fixtures import Relay
from tests.scripted_llm import ScriptedLLM, text

HELLO = next(t for t in bench_tasks.TASKS if t.name == "hello")


def measured(turns: list) -> tuple[bench_wait.Stamps, str]:
    with ScriptedLLM(turns, models=False) as llm:
        upstream = SimpleNamespace(base_url=llm.url.rsplit("/v1", 1)[0])
        relay = lambda stamps: Relay(upstream, rewrite=stamps.arrived)  # noqa: E731
        stamps, _, status = bench_wait.one_task(HELLO, llm.url, relay)
        llm.assert_all_used()
    return stamps, status


def test_a_slow_command_counts_as_the_models_not_the_harness():
    write = text('hello.py\n```python\nprint("Hello, world!")\n```')
    slow = text("```bash\nsleep 0.5 && python3 hello.py\n```")
    stamps, status = measured([write, slow, text("TASK_COMPLETE")])
    steps = stamps.steps()
    assert status == "completed" and len(steps) == 2
    assert steps[1]["tools"] >= 0.5 > steps[1]["harness"] >= 0
    assert all(s["checkpoints"] > 0 for s in steps)  # each step took its snapshots


def test_a_finish_check_counts_as_a_check():
    """An unchecked program is run by the finish (lmagent.loop.verify): that time is the
    check's, not the harness's."""
    write = text('hello.py\n```python\nimport time\ntime.sleep(0.5)\nprint("Hello, world!")\n```')
    stamps, status = measured([write, text("TASK_COMPLETE"), text("TASK_COMPLETE")])
    checks = sum(s["checks"] for s in stamps.steps())
    assert status == "completed" and checks >= 0.5
    assert all(s["harness"] < 0.5 for s in stamps.steps())
