"""Run every `bench/bench_*.py` benchmark and write bench/RESULTS.md.

    python -m bench                 # everything
    python -m bench --only grep     # one benchmark (repeat --only for more); the others' last
                                    # results are kept in RESULTS.md
    python -m bench.run --list

Each benchmark runs in a fresh subprocess with a timeout, so a crash, an import failure or a
hang is reported as that benchmark's failure and the others still run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULTS = BENCH_DIR / "RESULTS.md"
JSON_MARK = "<!-- bench-results-json"
DEFAULT_TIMEOUT = 900

# Benchmarks the issues ask for; one listed here without its file is reported as missing.
EXPECTED = {
    "loop": "per-step loop overhead (issue 2)",
    "startup": "`--version` start-up time (issue 2)",
    "resume": "resuming a 10,000-message session (issue 2)",
    "grep": "grep tool versus `grep -rn` (issue 2)",
    "sandbox": "sandboxed shell round trip (issue 3)",
    "web": "web UI streaming latency and memory (issue 5)",
    "bca": "parallel sub-agents (issue 4)",
    "scheduler": "scheduler pick-up latency (issue 6)",
    "realmodel": "agent overhead and tool-call validity against a real llama.cpp model (issue 8)",
    "checkpoints": "checkpoints versus a plain `git add -A && git commit` (issue 13)",
    "queue": "distributed queue (RQ on Redis) versus the directory inbox (issue 17)",
    "processes": "cost of the leftover sweep per sandboxed command (issue 14)",
    "tasks": "small coding tasks, agents side by side on one small model (issue 24)",
    "steps": "marginal cost per step by tool, workspace size and backend (issue 26)",
    "exercism": "Exercism's Python exercises, agents side by side on one small model",
    "speed": "--embedded on a CPU: a new run's first token, decoding with speculation",
    "wait": "harness time between the model's turns on whole real-model tasks (issue 35)",
    "oneshot": "a one-shot --embedded run's first token, the server kept warm or not (issue 35)",
}


# --------------------------------------------------------------------------- discovery and running


def discover() -> list[str]:
    return sorted(p.stem.removeprefix("bench_") for p in BENCH_DIR.glob("bench_*.py"))


def run_child(name: str, out: str) -> int:
    """In the subprocess: import one benchmark, call run(), write its result as JSON to `out`."""
    import importlib

    # On a timeout the runner sends SIGTERM: leave through SystemExit so `finally:` blocks
    # (temporary trees, server processes) still clean up.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    from bench.common import check_result

    module = importlib.import_module(f"bench.bench_{name}")
    data = check_result(module.run())
    data["name"] = name
    Path(out).write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    return 0


def run_one(name: str, timeout: float) -> dict:
    """Run one benchmark in a subprocess; a failure of any kind becomes a 'failed' result."""
    with tempfile.TemporaryDirectory(prefix="lmagent-bench-run-") as tmp:
        out = Path(tmp) / "result.json"
        command = [sys.executable, "-m", "bench.run", "--child", name, "--out", str(out)]
        load_before = load_average()
        start = time.monotonic()
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,  # so a timeout can end the benchmark's own children too
        )
        try:
            output, _ = process.communicate(timeout=timeout)
            problem = "" if process.returncode == 0 else f"exited with code {process.returncode}"
        except subprocess.TimeoutExpired:
            output = stop_group(process)
            problem = f"timed out after {timeout:g} s"
        elapsed = time.monotonic() - start
        if not problem:
            try:
                data = json.loads(out.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                problem = f"wrote no readable result ({exc})"
    if problem:  # the log's tail, with this checkout's location left out
        tail = "\n".join(output.strip().splitlines()[-25:]).replace(str(ROOT) + os.sep, "")
        data = {"name": name, "status": "failed", "figures": [], "error": problem, "log": tail}
    else:
        data["status"] = status_of(data["figures"])
    data["elapsed_s"] = round(elapsed, 1)
    data["date"] = now()
    data["load"] = f"{load_before} before, {load_average()} after"
    return data


def stop_group(process: subprocess.Popen, grace: float = 10) -> str:
    """End a benchmark's process group: SIGTERM (its clean-ups run), then SIGKILL."""
    os.killpg(process.pid, signal.SIGTERM)
    try:
        output, _ = process.communicate(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
    return output


def load_average() -> str:
    """The 1-minute load average: other work on the machine disturbs the timings."""
    try:
        return f"{os.getloadavg()[0]:.1f}"
    except (OSError, AttributeError):
        return "?"


def status_of(figures: list[dict]) -> str:
    verdicts = [f.get("met") for f in figures if f.get("target")]
    if any(v is False for v in verdicts):
        return "missed"
    return "met" if verdicts else "measured"


def now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


# --------------------------------------------------------------------------- the machine


def machine() -> dict:
    import shutil

    return {
        "CPU": cpu_model(),
        "cores": f"{os.cpu_count()} logical",
        "RAM": f"{ram_bytes() / 2**30:.1f} GiB" if ram_bytes() else "unknown",
        "OS": platform.platform(),
        "Python": f"{platform.python_implementation()} {platform.python_version()}",
        "grep": _first_line(["grep", "--version"]) if shutil.which("grep") else "not installed",
        "commit": git_commit(),
        "load average (1, 5, 15 min)": load_averages(),
    }


def load_averages() -> str:
    try:
        return ", ".join(f"{value:.1f}" for value in os.getloadavg())
    except (OSError, AttributeError):
        return "unknown"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        return _first_line(["sysctl", "-n", "machdep.cpu.brand_string"]) or platform.processor()
    return platform.processor() or platform.machine()


def ram_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        try:
            import psutil

            return psutil.virtual_memory().total
        except ImportError:
            return 0


def git_commit() -> str:
    commit = _first_line(["git", "rev-parse", "--short", "HEAD"])
    if not commit:
        return "unknown"
    dirty = _first_line(["git", "status", "--porcelain", "--untracked-files=no"])
    return commit + (" (with uncommitted changes)" if dirty else "")


def _first_line(command: list[str]) -> str:
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = done.stdout.strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else ""


# --------------------------------------------------------------------------- RESULTS.md


def previous_results() -> dict[str, dict]:
    """Results kept from the last run (embedded as JSON at the end of RESULTS.md)."""
    try:
        text = RESULTS.read_text(encoding="utf-8")
    except OSError:
        return {}
    start = text.find(JSON_MARK)
    end = text.find("-->", start)
    if start < 0 or end < 0:
        return {}
    try:
        data = json.loads(text[start + len(JSON_MARK) : end])
    except ValueError:
        return {}
    return {r["name"]: r for r in data.get("results", []) if isinstance(r, dict) and "name" in r}


def format_value(value: object, unit: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{value} {unit}".strip()
    if isinstance(value, float):
        text = f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    else:
        text = f"{value:,}"
    return f"{text} {unit}".strip()


def verdict(item: dict) -> str:
    if not item.get("target"):
        return "—"
    return {True: "yes", False: "**no**"}.get(item.get("met"), "?")


def section(data: dict) -> list[str]:
    name = data["name"]
    title = data.get("title") or EXPECTED.get(name, "")
    lines = [f"## {name}" + (f" — {title}" if title else ""), ""]
    lines.append(f"Status: **{data['status']}** · run {data.get('date', '?')}")
    if data.get("elapsed_s") is not None:
        lines[-1] += f" · took {data['elapsed_s']} s"
    if data.get("load"):
        lines[-1] += f" · load average {data['load']}"
    lines.append("")
    if data["status"] == "missing":
        lines.append(f"No `bench/bench_{name}.py` yet.")
        return [*lines, ""]
    if data["status"] == "failed":
        lines.append(f"Failed: {data.get('error', '?')}")
        if data.get("log"):
            lines += ["", "```", data["log"], "```"]
        return [*lines, ""]
    lines += ["| figure | value | target | met? |", "|---|---|---|---|"]
    for item in data["figures"]:
        cells = (
            item["name"],
            format_value(item["value"], item.get("unit", "")),
            item.get("target") or "—",
            verdict(item),
        )
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    if data.get("notes"):
        lines += ["", data["notes"]]
    return [*lines, ""]


def render(results: list[dict], info: dict) -> str:
    lines = [
        "# Benchmark results",
        "",
        "Written by `python -m bench` (see bench/run.py); each benchmark ran in its own process.",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
        *(f"| {key} | {value} |" for key, value in info.items()),
        f"| written | {now()} |",
        "",
        "## Summary",
        "",
        "| benchmark | status | targets met | run |",
        "|---|---|---|---|",
    ]
    for data in results:
        targeted = [f for f in data.get("figures", []) if f.get("target")]
        met = sum(1 for f in targeted if f.get("met") is True)
        count = f"{met}/{len(targeted)}" if targeted else "—"
        lines.append(f"| {data['name']} | {data['status']} | {count} | {data.get('date', '—')} |")
    lines.append("")
    for data in results:
        lines += section(data)
    blob = json.dumps({"machine": info, "results": results}, indent=1, default=str)
    lines += [JSON_MARK, blob.replace("-->", "-- >"), "-->", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--only", action="append", metavar="NAME", help="run only this benchmark")
    parser.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per benchmark"
    )
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    parser.add_argument("--no-write", action="store_true", help="do not write RESULTS.md")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        try:
            return run_child(args.child, args.out)
        except Exception as exc:
            if type(exc).__name__ == "ResultShapeError":
                print(exc)
            else:
                traceback.print_exc()
            return 1
    found = discover()
    names = [*EXPECTED, *(n for n in found if n not in EXPECTED)]
    if args.list:
        for name in names:
            print(f"{name:12} {'' if name in found else '(missing) '}{EXPECTED.get(name, '')}")
        return 0
    selected = names
    if args.only:
        wanted = {n.removeprefix("bench_").removesuffix(".py") for n in args.only}
        unknown = sorted(wanted - set(names))
        if unknown:
            print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(names)}")
            return 2
        selected = [n for n in names if n in wanted]
    kept = previous_results() if args.only else {}
    fresh = {}
    for name in selected:
        if name not in found:
            fresh[name] = {"name": name, "status": "missing", "figures": [], "date": now()}
            print(f"{name:12} missing (no bench/bench_{name}.py)", flush=True)
            continue
        print(f"{name:12} running ...", end="", flush=True)
        fresh[name] = data = run_one(name, args.timeout)
        print(f" {data['status']} in {data['elapsed_s']} s {data.get('error', '')}", flush=True)
    merged = {**kept, **fresh}
    results = [merged[n] for n in names if n in merged]
    if not args.no_write:
        RESULTS.write_text(render(results, machine()), encoding="utf-8")
        print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 1 if any(fresh[n]["status"] == "failed" for n in fresh) else 0


if __name__ == "__main__":
    sys.exit(main())
