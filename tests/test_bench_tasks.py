"""bench/bench_tasks.py: every checker rejects the untouched task and accepts its reference
solution; the harness runs a real agent process against a server (here the scripted one) and
counts what the server reports; LMAgent runs as --embedded sets the default model up."""

from __future__ import annotations

import json
import os
import tempfile

import pytest

import lmagent.llm.embedded as embedded_llm
from bench import bench_tasks
from lmagent.core.config import Config
from tests.conftest import make_config
from tests.scripted_llm import ScriptedLLM, text

TASKS = {task.name: task for task in bench_tasks.TASKS}


def test_there_are_at_least_15_tasks_of_every_kind_asked_for():
    assert len(TASKS) == len(bench_tasks.TASKS) >= 15  # names are unique
    kinds = {task.kind for task in bench_tasks.TASKS}
    assert {"two-step", "read-and-answer", "fix-test", "multi-file", "git", "data"} <= kinds


@pytest.mark.parametrize("name", list(TASKS))
def test_the_checker_rejects_the_start_and_accepts_a_solution(tmp_path, name):
    task = TASKS[name]
    bench_tasks.prepare(task, tmp_path)
    assert not task.check(tmp_path)
    task.solve(tmp_path)
    assert task.check(tmp_path)


def test_a_checker_is_not_fooled_by_a_wrong_answer(tmp_path):
    task = TASKS["csv-filter"]
    bench_tasks.prepare(task, tmp_path)
    (tmp_path / "older.txt").write_text("Ada\nDee\nCyd\nEve\n")  # Dee is 30, not older
    assert not task.check(tmp_path)


def test_the_harness_runs_lmagent_and_counts_the_server_s_tokens(tmp_path):
    write_call = json.dumps(
        {"name": "write", "arguments": {"path": "hello.py", "content": "print('Hello, world!')"}}
    )
    run = text("```bash\npython3 hello.py\n```")
    turns = [text(f"<tool_call>{write_call}</tool_call>"), run, text("It ran.\nTASK_COMPLETE")]
    agent = bench_tasks.lmagent("lmagent", bench_tasks.ROOT, embedded=True)
    with ScriptedLLM(turns) as llm, bench_tasks.Meter(llm.base_url) as meter:
        outcome = bench_tasks.run_one(agent, TASKS["hello"], meter, timeout=120)
        llm.assert_all_used()
        sent = llm.requests
    assert (outcome.solved, outcome.requests, outcome.exit) == (True, 3, "exit 0")
    assert outcome.prompt_evaluated > 100 and outcome.generated > 0  # the server's usage
    assert all("tools" not in body and body["temperature"] == 0 for body in sent)
    row = bench_tasks.summary([outcome])[0]
    assert (row["solved"], row["tasks"], row["requests"]) == (1, 1, 3)
    assert "| lmagent | 1 / 1 | 3 |" in bench_tasks.table([outcome])
    assert len(outcome.per_request) == 3
    assert not bench_sandboxes("hello")  # the run's Docker sandbox went with its folder


def test_a_cold_run_begins_after_a_one_word_prompt_left_out_of_its_counts(tmp_path):
    """--cold: before each run the server's slot is given a one-word prompt, so nothing of the
    last run's prompt is reused; that request is not one of the run's."""
    write_call = json.dumps(
        {"name": "write", "arguments": {"path": "hello.py", "content": "print('Hello, world!')"}}
    )
    run = text("```bash\npython3 hello.py\n```")
    turns = [text("ok"), text(f"<tool_call>{write_call}</tool_call>"), run, text("TASK_COMPLETE")]
    agent = bench_tasks.lmagent("lmagent", bench_tasks.ROOT, embedded=True)
    with ScriptedLLM(turns) as llm, bench_tasks.Meter(llm.base_url, cold=True) as meter:
        outcome = bench_tasks.run_one(agent, TASKS["hello"], meter, timeout=120)
        llm.assert_all_used()
        sent = llm.requests
    assert sent[0]["messages"] == [{"role": "user", "content": "cold"}], sent[0]
    assert sent[0]["max_tokens"] == 1 and len(sent) == 4
    assert (outcome.requests, len(outcome.per_request), outcome.cold) == (3, 3, True)
    assert outcome.solved


def bench_sandboxes(task: str) -> list[str]:
    """Workspaces of the Docker sandboxes left for a task's benchmark folders."""
    try:
        import docker

        found = docker.from_env(timeout=30).containers.list(
            all=True, filters={"label": "lmagent.sandbox=1"}
        )
    except Exception:  # no engine: no sandbox could be left
        return []
    prefix = os.path.join(tempfile.gettempdir(), f"bench-{task}-")
    workspaces = [c.labels.get("lmagent.workspace", "") for c in found]
    return [w for w in workspaces if w.startswith(prefix)]


def test_the_cache_ratio_compares_evaluated_with_new_tokens():
    outcome = bench_tasks.Outcome("a", "t", True, 3, 0, 0, 0, 1.0, "exit 0")
    # 500 evaluated, 40 generated; then 640 in all, 100 of them new, and only those evaluated;
    # then 970 in all, 300 of them new, but 600 evaluated (part of the cache was thrown away)
    outcome.per_request = [[500, 0, 40], [100, 540, 30], [600, 370, 10]]
    assert bench_tasks.cache_ratios([outcome]) == [1.0, 2.0]
    assert bench_tasks.summary([outcome])[0]["cache_ok"] == "1 / 2"


def test_an_agent_past_its_time_is_stopped_and_the_task_checked(tmp_path):
    agent = bench_tasks.Agent("sleeper", lambda task, folder, url: (["sleep", "30"], {}))
    with ScriptedLLM([]) as llm, bench_tasks.Meter(llm.base_url) as meter:
        outcome = bench_tasks.run_one(agent, TASKS["hello"], meter, timeout=0.5)
    assert (outcome.solved, outcome.exit, outcome.requests) == (False, "timed out", 0)


LLAMA_STREAM = (
    b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'
    b'data: {"choices":[{"delta":{},"finish_reason":"stop"}],'
    b'"timings":{"cache_n":812,"prompt_n":37,"predicted_n":5}}\n\n'
    b"data: [DONE]\n\n"
)


def test_llama_cpp_timings_are_read_from_a_stream():
    counted = bench_tasks.counts_of(LLAMA_STREAM)
    assert (counted.prompt_evaluated, counted.prompt_reused, counted.generated) == (37, 812, 5)


def test_usage_is_read_where_there_are_no_timings():
    reply = {
        "choices": [],
        "usage": {
            "prompt_tokens": 100,
            "completion_tokens": 7,
            "prompt_tokens_details": {"cached_tokens": 60},
        },
    }
    counted = bench_tasks.counts_of(json.dumps(reply).encode())
    assert (counted.prompt_evaluated, counted.prompt_reused, counted.generated) == (40, 60, 7)


def test_lmagent_runs_as_embedded_sets_the_default_model_up(workspace):
    env = bench_tasks.lmagent_env("http://127.0.0.1:9", bench_tasks.ROOT, embedded=True)
    config = Config.load(environ={**env, "WORKSPACE": str(workspace)})
    base = make_config(workspace)
    embedded = base.with_changes(**embedded_llm.embedded_settings(base, config.llm_url))
    for name in ("llm_temperature", "tool_set", "tool_call_mode", "llm_max_tokens"):
        assert getattr(config, name) == getattr(embedded, name), name


def test_the_bench_section_is_made_from_recorded_runs(tmp_path, monkeypatch):
    runs = tmp_path / "runs.jsonl"
    outcome = bench_tasks.Outcome("lmagent", "hello", True, 2, 600, 500, 60, 9.0, "exit 0")
    outcome.per_request = [[557, 0, 50], [60, 607, 10]]
    runs.write_text(json.dumps(outcome.__dict__) + "\n")
    monkeypatch.setenv("BENCH_TASKS_RUNS", str(runs))
    section = bench_tasks.run()
    values = {f["name"]: (f["value"], f["met"]) for f in section["figures"]}
    assert values["lmagent: tasks solved"] == (1, None)
    assert values["lmagent: largest first request"] == (557, True)
    assert values["lmagent: prompt tokens evaluated / new"] == (1.0, True)  # 60 of 60 new
    assert "| lmagent | 1 / 1 |" in section["notes"]


def test_lmagent_is_compared_with_each_peer_on_the_tasks_both_ran():
    def outcome(agent, task, solved, evaluated):
        return bench_tasks.Outcome(agent, task, solved, 1, evaluated, 0, 0, 1.0, "exit 0")

    outcomes = [
        outcome("lmagent", "a", True, 100),
        outcome("lmagent", "b", True, 300),
        outcome("lmagent", "c", False, 50),
        outcome("aider", "a", True, 500),
        outcome("aider", "b", False, 100),  # c: not run by aider
        outcome("mini", "a", False, 900),
    ]
    found = {f["name"]: f for f in bench_tasks.versus_peers(outcomes)}
    solved = found["lmagent vs aider: solved on the 2 tasks both ran"]
    assert (solved["value"], solved["met"]) == ("2 vs 1", True)
    per = found["lmagent vs aider: prompt tokens evaluated per task solved"]
    assert (per["value"], per["met"]) == ("200 vs 600", True)
    assert found["lmagent vs mini: prompt tokens evaluated per task solved"]["value"] == "100 vs —"


def test_one_shot_runs_compare_wall_time_per_task_solved():
    def outcome(agent, task, solved, seconds):
        return bench_tasks.Outcome(agent, task, solved, 0, 0, 0, 0, seconds, "exit 0")

    runs = [
        outcome(bench_tasks.ONESHOT, "hello", True, 10.0),
        outcome(bench_tasks.ONESHOT, "rename", False, 20.0),
        outcome(bench_tasks.ONESHOT_BEFORE, "hello", True, 40.0),
        outcome(bench_tasks.ONESHOT_BEFORE, "rename", True, 40.0),
    ]
    figures = {f["name"]: f for f in bench_tasks.oneshot_figures(runs)}
    ratio = figures["lmagent-oneshot / lmagent-oneshot-before: wall time per task solved"]
    assert (ratio["value"], ratio["met"]) == (0.75, False)  # 30 s per solved task against 40
    assert figures["lmagent-oneshot: wall time per task solved (1 of 2)"]["value"] == 30.0
    assert bench_tasks.oneshot_figures(runs[:2]) == []  # nothing to compare with
