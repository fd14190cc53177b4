"""Shared pieces of the benchmarks: timing statistics, a prepared data folder, a served API."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.serving import free_port, run_tutor, wait_ready  # noqa: E402

DEV = ROOT / "data" / "eval" / "dev.jsonl"


def percentiles(samples: list[float]) -> tuple[float, float]:
    """(p50, p99) in milliseconds of samples in seconds."""
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1000, p99 * 1000


T = TypeVar("T")


def p50_ms_each(fn: Callable[[T], object], inputs: Sequence[T]) -> float:
    """The median duration, in milliseconds, of one call of fn on each input in turn."""
    samples = []
    for x in inputs:
        start = time.perf_counter()
        fn(x)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def time_calls(fn: Callable[[], object], n: int, warmup: int = 10, pause_s: float = 0.0) -> list[float]:
    """Durations of n calls after a warm-up, `pause_s` apart."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(n):
        if pause_s:
            time.sleep(pause_s)
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def bench_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """Environment for a `tutor` process on the given data folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUTOR_")}
    # The benchmarks send far more anonymous asks and chat turns than a learner's per-address limit allows.
    limits = {"TUTOR_ANONYMOUS_ASK_RATE_LIMIT": "1000000/minute", "TUTOR_ANONYMOUS_CHAT_RATE_LIMIT": "1000000/minute"}
    return {**env, "TUTOR_DATA_DIR": str(data_dir), **limits, **extra}


def copy_project_data(data: Path) -> None:
    """The project's quiz documents, study notes, taxonomy and annotations in `data`, and its exported
    encoder when there is one (reused rather than exported again)."""
    shutil.copytree(ROOT / "data" / "raw", data / "raw")
    shutil.copytree(ROOT / "data" / "notes", data / "notes")
    for name in ("taxonomy.yaml", "annotations.yaml"):
        shutil.copy(ROOT / "data" / name, data / name)
    exported = ROOT / "data" / "index" / "encoders"
    if exported.exists():
        shutil.copytree(exported, data / "index" / "encoders")


@contextmanager
def prepared_data() -> Iterator[Path]:
    """A temporary copy of the project's data (`copy_project_data`) with the bank ingested."""
    with tempfile.TemporaryDirectory(prefix="tutor-bench-") as tmp:
        data = Path(tmp) / "data"
        copy_project_data(data)
        run_tutor(bench_env(data), "ingest")
        yield data


@contextmanager
def served(env: dict[str, str], command: tuple[str, ...] = ("-m", "app.cli.launch", "serve"),
           cwd: Path | None = None) -> Iterator[tuple[str, subprocess.Popen[str], float]]:
    """`tutor serve` (or another Python `command` taking --port) on a free port, run in `cwd` (default:
    this process's); yields (base URL, process, seconds from start to /readyz 200). `python -m` puts
    the working folder first on the import path, ahead of PYTHONPATH: code from elsewhere needs `cwd`."""
    port = free_port()
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *command, "--port", str(port)], env=env, cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, 180, lambda: None if proc.poll() is None else "tutor serve exited", poll_s=0.02)
        yield base, proc, time.perf_counter() - start
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def dev_answers() -> list[str]:
    """The development set's answers: the realistic mix of lengths the load sends."""
    rows = [json.loads(line) for line in DEV.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [" ".join(r["answer"].split()) for r in rows]
