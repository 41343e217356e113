"""LMAgent benchmark suite: `python -m bench` runs every `bench/bench_*.py` and writes RESULTS.md.

A benchmark module exposes `run() -> dict` in the shape built by `bench.common.result`.
Run it from the repository root (or with the package installed), like the tests.
"""
