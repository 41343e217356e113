"""bench/bench_exercism.py: the vendored sample is complete, the solved-check runs the original
tests (a reference solution passes, the stub fails, tests an agent edited are restored first),
and the harness runs a real LMAgent process against a server (here the scripted one)."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bench import bench_exercism, bench_tasks
from tests.scripted_llm import ScriptedLLM, text

SLUG = "raindrops"  # a small exercise of the sample, with one stub and one test file


def write_call(path: str, content: str) -> dict:
    call = {"name": "write", "arguments": {"path": path, "content": content}}
    return text(f"<tool_call>{json.dumps(call)}</tool_call>")


def test_the_sample_is_fixed_named_with_its_commit_and_complete():
    manifest = bench_exercism.manifest()
    assert re.fullmatch(r"[0-9a-f]{40}", manifest["commit"])
    samples = manifest["samples"]
    assert [s["start"] for s in samples] == sorted(bench_exercism.STARTS)
    for sample in samples:
        assert len(sample["slugs"]) >= 30 and sample["slugs"] == sorted(sample["slugs"])
    held_out = {e.slug for e in bench_exercism.exercises(2)}
    assert held_out and not held_out & {e.slug for e in bench_exercism.exercises(0)}
    assert (bench_exercism.EXERCISES / "LICENSE").read_text().startswith("MIT License")
    for exercise in bench_exercism.exercises():
        assert exercise.instructions.lstrip().startswith("# "), exercise.slug
        assert set(exercise.solutions) == set(exercise.examples), exercise.slug
        assert {*exercise.solutions, *exercise.tests} <= set(exercise.files), exercise.slug


@pytest.fixture
def exercise():
    return bench_exercism.load_exercise(SLUG)


def test_the_reference_solution_passes_and_the_stub_does_not(tmp_path, exercise):
    task = bench_exercism.as_task(exercise)
    bench_tasks.prepare(task, tmp_path)
    assert not bench_exercism.solved(exercise, tmp_path)
    task.solve(tmp_path)
    assert bench_exercism.solved(exercise, tmp_path)


def test_tests_an_agent_edited_or_skipped_are_the_original_ones_when_checked(tmp_path, exercise):
    test_file = exercise.tests[0]
    bench_tasks.prepare(bench_exercism.as_task(exercise), tmp_path)
    (tmp_path / test_file).write_text("def test_nothing():\n    pass\n")
    (tmp_path / "conftest.py").write_text(
        "import pytest\n\n\ndef pytest_collection_modifyitems(items):\n"
        "    for item in items:\n        item.add_marker(pytest.mark.skip)\n"
    )
    assert not bench_exercism.solved(exercise, tmp_path)
    assert (tmp_path / test_file).read_text() == exercise.files[test_file]


def run_lmagent(exercise, turns: list[dict]) -> bench_tasks.Outcome:
    agent = bench_exercism.agents(bench_tasks.ROOT)["lmagent-embedded"]
    with ScriptedLLM(turns) as llm, bench_tasks.Meter(llm.base_url) as meter:
        outcome = bench_tasks.run_one(agent, bench_exercism.as_task(exercise), meter, 120)
        first = "\n".join(str(m["content"]) for m in llm.requests[0]["messages"])
    assert exercise.instructions.strip() in first and exercise.test_command in first
    return outcome


def test_the_harness_counts_a_solution_the_agent_wrote_as_solved(exercise):
    (stub,) = exercise.solutions
    turns = [
        write_call(stub, exercise.examples[stub]),
        write_call(exercise.tests[0], "def test_nothing():\n    pass\n"),
        text(f"```bash\n{exercise.test_command}\n```"),
        text("The tests pass.\nTASK_COMPLETE"),
    ]
    outcome = run_lmagent(exercise, turns)
    assert (outcome.task, outcome.solved) == (SLUG, True)
    assert outcome.requests >= 3 and outcome.read_evaluated == outcome.prompt_evaluated > 0


def test_the_harness_does_not_count_a_rewritten_test_file_as_solved(exercise):
    turns = [
        write_call(exercise.tests[0], "def test_nothing():\n    pass\n"),
        text(f"```bash\n{exercise.test_command}\n```"),
        text("The tests pass.\nTASK_COMPLETE"),
    ]
    outcome = run_lmagent(exercise, turns)
    assert outcome.requests >= 3 and not outcome.solved


def test_aider_gets_the_stub_and_the_tests_as_its_test_command(tmp_path, exercise):
    task = bench_exercism.as_task(exercise)
    argv, _ = bench_exercism.agents(tmp_path)["aider"].command(task, tmp_path, "http://h:1")
    assert argv[argv.index("--test-cmd") + 1] == f"python -m pytest -q {SLUG}_test.py"
    assert "--auto-test" in argv and argv[-2:] == [task.prompt, f"{SLUG}.py"]


def test_lmagent_with_defaults_is_given_only_the_server_and_the_step_cap(tmp_path, exercise):
    task = bench_exercism.as_task(exercise)
    agents = bench_exercism.agents(tmp_path)
    _, env = agents["lmagent-defaults"].command(task, tmp_path, "http://h:1")
    _, embedded = agents["lmagent-embedded"].command(task, tmp_path, "http://h:1")
    assert env["LLM_URL"] == "http://h:1/v1/chat/completions" and env["MAX_ITERATIONS"] == "15"
    changed = {name for name in {*env, *embedded} if env.get(name) != embedded.get(name)}
    assert changed == {"LLM_MODEL", "LLM_MAX_TOKENS", "LLM_TIMEOUT", "LLM_TEMPERATURE"} | {
        "TOOL_SET",
        "TOOL_CALL_MODE",
    }


def test_the_section_gives_each_agent_s_share_solved(tmp_path, monkeypatch):
    def outcome(agent, task, solved):
        found = bench_tasks.Outcome(agent, task, solved, 2, 900, 300, 80, 30.0, "exit 0")
        found.read_evaluated, found.read_generated = 700, 60  # the rest: replies cut short
        return found.__dict__

    runs = tmp_path / "runs.jsonl"
    rows = [outcome("aider", "a", True), outcome("aider", "b", False), outcome("x", "a", True)]
    runs.write_text("".join(json.dumps(row) + "\n" for row in rows))
    monkeypatch.setenv("BENCH_EXERCISM_RUNS", str(runs))
    section = bench_exercism.run()
    values = {f["name"]: (f["value"], f["unit"]) for f in section["figures"]}
    assert values["aider: exercises solved"] == (50, "% of 2")
    assert "| aider | 1 / 2 | 50 % | 4 | 1,800 / 600 | 160 | 1,400 / 120 |" in section["notes"]
    assert "| b | — (30 s) | not run |" in section["notes"]


class MetricsHandler(BaseHTTPRequestHandler):
    """llama.cpp's /metrics (Prometheus text) after a reply cut short and one read through."""

    counts = iter(())  # requests_processing at each look (0 when used up)

    def do_GET(self) -> None:
        body = (
            "# TYPE llamacpp:prompt_tokens_total counter\n"
            "llamacpp:prompt_tokens_total 1234\n"
            "llamacpp:prompt_tokens_cached_total 89\n"
            "llamacpp:tokens_predicted_total 567\n"
            f"llamacpp:requests_processing {next(self.counts, '0')}\n"
        ).encode()
        self.send_response(200 if self.path == "/metrics" else 404)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_the_server_s_totals_are_read_from_its_metrics_once_it_is_idle():
    MetricsHandler.counts = iter(["1", "1", "0"])
    with ThreadingHTTPServer(("127.0.0.1", 0), MetricsHandler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        meter = bench_tasks.Meter(f"http://127.0.0.1:{server.server_address[1]}")
        totals = meter.server_totals()
        server.shutdown()
    assert (totals.prompt_evaluated, totals.prompt_reused, totals.generated) == (1234, 89, 567)
    assert next(MetricsHandler.counts, "read") == "read"  # it waited for requests_processing 0


def test_a_server_without_metrics_has_no_totals():
    with ScriptedLLM([]) as llm:
        assert bench_tasks.Meter(llm.base_url).server_totals() is None
