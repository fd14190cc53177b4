"""Two commits side by side on this machine, in one run: the grading API's figures, measured in turns.

    .venv/bin/python bench/compare_commits.py OLD NEW [--rounds 3]

Each commit is checked out in a temporary git worktree and runs its own code (its own ingestion, its
own `tutor serve`, found from its pyproject's entry point) on this project's virtual environment.
The two servers are measured in alternation, OLD then NEW, `rounds` times, so a machine that speeds
up or slows down within minutes moves both alike. Per round: seconds from start to /readyz, POST
/v1/grade p50 and p99 from one client (5 s), answers/s at 32 clients (10 s, wrk when installed), and
resident memory after the load; and, around each server's round, the p50 of one int8 encode of the same
answer in this process (`encode_alone`, as a lone request is encoded), so that the p50 is also read as a
ratio to one encode measured within the same minute (the issue's grading target). Printed: every round,
the medians, and NEW / OLD.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import psutil
from bench_api import bank_question, latency, throughput
from bench_encoder import served_onnx
from common import ROOT, bench_env, percentiles, served, time_calls

FIGURES = ("ready_s", "p50_ms", "p99_ms", "per_s_32", "rss_mb", "encode_ms", "p50_x_encode")
ANSWER = "reduce-scatter splits the sum so each rank keeps one shard"


def _worktree(commit: str, where: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), commit],
                   check=True, capture_output=True)
    return where


def _module(tree: Path) -> str:
    """The `tutor` command's module at that commit (e.g. app.cli.launch)."""
    scripts = tomllib.loads((tree / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    return str(scripts["tutor"]).split(":")[0]


def _data(tree: Path, root: Path) -> Path:
    """The commit's own documents and notes in a data folder, ingested by the commit's code."""
    data = root / "data"
    shutil.copytree(tree / "data" / "raw", data / "raw")
    if (tree / "data" / "notes").exists():
        shutil.copytree(tree / "data" / "notes", data / "notes")
    for name in ("taxonomy.yaml", "annotations.yaml"):
        shutil.copy(tree / "data" / name, data / name)
    return data


def _env(tree: Path, data: Path) -> dict[str, str]:
    return {**bench_env(data), "PYTHONPATH": str(tree)}


def _tutor(tree: Path, env: dict[str, str], *args: str) -> str:
    """Run one `tutor` command of the commit, in its tree: `python -m` imports from the working folder
    first, ahead of PYTHONPATH (run from this project's root, it would run this project's code); its
    standard output."""
    return subprocess.run([sys.executable, "-m", _module(tree), *args], env=env, cwd=tree, check=True,
                          capture_output=True, text=True, timeout=600).stdout


def _check_code(tree: Path, env: dict[str, str]) -> None:
    """Refuse to measure unless the commit's own code is what its processes import."""
    where = subprocess.run([sys.executable, "-c", "import app; print(app.__file__)"], env=env, cwd=tree,
                           check=True, capture_output=True, text=True).stdout.strip()
    if not Path(where).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"{tree.name} would run {where}, not its own code")


def _round(tree: Path, env: dict[str, str], encode_ms: Callable[[], float]) -> dict[str, float]:
    before = encode_ms()
    with served(env, ("-m", _module(tree), "serve"), cwd=tree) as (base, proc, ready_s):
        out = _tutor(tree, env, "keys", "create", "bench", "--rate-limit", "1000000/minute")
        key = re.findall(r"(gt_[A-Za-z0-9_-]{43})", out)[0]
        qid = bank_question(base)
        p50, p99 = latency(base, key, qid, ANSWER, 5.0)
        rate = throughput(base, key, qid, 32)[0]
        rss = psutil.Process(proc.pid).memory_info().rss / 2**20
    encode = (before + encode_ms()) / 2
    return {"ready_s": ready_s, "p50_ms": p50, "p99_ms": p99, "per_s_32": rate, "rss_mb": rss,
            "encode_ms": encode, "p50_x_encode": p50 / encode}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"# {args.old} vs {args.new}: {os.cpu_count()} cores, {args.rounds} rounds in turns")
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tutor-compare-")))
        trees, envs = {}, {}
        for name in ("old", "new"):
            tree = _worktree(getattr(args, name), tmp / f"{name}-tree")
            stack.callback(subprocess.run, ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                           capture_output=True)
            data = _data(tree, tmp / name)
            env = _env(tree, data)
            _check_code(tree, env)
            start = time.perf_counter()
            _tutor(tree, env, "ingest")
            print(f"{name}: {getattr(args, name)} ingested in {time.perf_counter() - start:.0f} s")
            trees[name], envs[name] = tree, env
        encoder = served_onnx()[0]  # this project's int8 encoder, as served (both commits encode alike)
        encode_ms = lambda: percentiles(time_calls(lambda: encoder.encode_alone([ANSWER]), 200))[0]  # noqa: E731
        rows: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
        for r in range(args.rounds):
            for name in ("old", "new"):
                row = _round(trees[name], envs[name], encode_ms)
                rows[name].append(row)
                print(f"round {r + 1} {name}: " + "  ".join(f"{k} {row[k]:.2f}" for k in FIGURES), flush=True)
    med = {name: {k: statistics.median(row[k] for row in rows[name]) for k in FIGURES} for name in rows}
    print("\nmedians       " + "  ".join(f"{k:>9s}" for k in FIGURES))
    for name in ("old", "new"):
        print(f"{name:12s}  " + "  ".join(f"{med[name][k]:9.2f}" for k in FIGURES))
    print("new / old     " + "  ".join(f"{med['new'][k] / med['old'][k]:9.2f}" for k in FIGURES))


if __name__ == "__main__":
    main()
