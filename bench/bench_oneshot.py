"""A one-shot `--embedded` run as a user starts it (`python agent_main.py --embedded --json
TASK`), timed from the command to its first streamed token and to its end: with a new server
each run (EMBEDDED_KEEP_WARM=0, as before) and with the server an earlier run kept loaded
(EMBEDDED_KEEP_WARM=5, the default), alternated ROUNDS times after one run of each (which saves
the prompt, and loads the kept server). The default model (Qwen2.5-Coder-1.5B Q4_K_M), the saved
prompt kept in each setting's own cache folder (both reuse it), the workspace's sandbox as
configured, the server's memory (VmRSS) at the end. Target (issue 35): the first token ≤ 3 s
after the command with the server kept warm.

    python -m bench --only oneshot
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from bench.common import ROOT, at_most, figure, median, model_cache, result, temp_workspace

ROUNDS = 3
TASK = "How many lines does notes.txt have? Answer with the number."
FIRST_TOKEN_TARGET = 3.0
TITLE = "--embedded one-shot runs: from the command to the first token, server kept warm or not"


def one_run(workspace: Path, cache: Path, keep_warm: float) -> dict:
    """Seconds to the first `token` event and to the end of one run."""
    env = {
        **os.environ,
        "XDG_CACHE_HOME": str(cache),
        "EMBEDDED_MODEL": "",
        "EMBEDDED_KEEP_WARM": str(keep_warm),
        "MAX_ITERATIONS": "1",
        "LLM_MAX_TOKENS": "16",
        "ENABLE_MCP": "false",
        "PERMISSION_MODE": "auto",
    }
    argv = [sys.executable, str(ROOT / "agent_main.py"), "--embedded", "--json"]
    argv += ["--workspace", str(workspace), TASK]
    started = time.perf_counter()
    first = None
    with subprocess.Popen(
        argv, cwd=workspace, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    ) as process:
        for line in process.stdout:
            if first is None and _is_token(line):
                first = time.perf_counter() - started
    return {"first": first, "total": time.perf_counter() - started}


def _is_token(line: str) -> bool:
    try:
        return json.loads(line).get("type") == "token"
    except (ValueError, AttributeError):
        return False


def warm_server_rss(cache: Path) -> float:
    """VmRSS in MB of the server kept warm in `cache`."""
    from lmagent.llm.warm import WarmServer

    folder = cache / "lmagent" / "warm"
    for record in folder.glob("*.json"):
        found = WarmServer(folder, record.stem).read()
        if found:
            return psutil.Process(found["pid"]).memory_info().rss / 2**20
    return 0.0


def run() -> dict:
    from lmagent.llm.embedded import stop_warm_servers

    runs: dict[str, list[dict]] = {"new": [], "warm": []}
    with temp_workspace() as workspace, temp_workspace("lmagent-bench-cache-") as parent:
        (workspace / "notes.txt").write_text("one\ntwo\nthree\n")
        caches = {"new": model_cache(parent / "new"), "warm": model_cache(parent / "warm")}
        try:
            one_run(workspace, caches["new"], 0)  # saves the prompt in its cache
            loading = one_run(workspace, caches["warm"], 5)  # loads the server kept warm
            for _ in range(ROUNDS):
                for setting, keep_warm in (("new", 0), ("warm", 5)):
                    runs[setting].append(one_run(workspace, caches[setting], keep_warm))
            rss = warm_server_rss(caches["warm"])
        finally:
            stop_warm_servers(caches["warm"] / "lmagent" / "warm")
    return result("oneshot", figures(runs, loading, rss), notes(), TITLE)


def figures(runs: dict[str, list[dict]], loading: dict, rss: float) -> list[dict]:
    def p50(setting: str, key: str) -> float:
        return round(median([r[key] for r in runs[setting] if r[key] is not None]), 2)

    new, warm = p50("new", "first"), p50("warm", "first")
    return [
        figure("first token after the command, a new server each run, p50", new, "s"),
        at_most("first token after the command, server kept warm, p50", warm, "s", 3.0),
        figure("first token: kept warm / new server", round(warm / new, 2), "×"),
        figure("whole run, a new server each run, p50", p50("new", "total"), "s"),
        figure("whole run, server kept warm, p50", p50("warm", "total"), "s"),
        figure("the run that loaded the kept server: first token", round(loading["first"], 2), "s"),
        figure("server kept warm: memory after the runs (VmRSS)", round(rss), "MB"),
    ]


def notes() -> str:
    return (
        f"{ROUNDS} rounds, alternated, after one run of each (the first saves the prompt; the "
        "kept server's also starts it). Each run: "
        f'`agent_main.py --embedded --json` with "{TASK}", one step, replies of at most 16 '
        "tokens; the saved prompt in each setting's own cache folder, so both read only the "
        "task. The difference is the process start and the model's load (the model file in "
        "the page cache). The machine may be shared; the two settings ran side by side."
    )
