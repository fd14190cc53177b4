"""The served API: start-up to ready, resident memory, POST /v1/grade latency and throughput under load."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypedDict

import httpx
import psutil
from bench_encoder import ANSWER, EncoderProbe
from common import bench_env, dev_answers, percentiles, prepared_data, served

from app.serving.runtime import TRIM_S
from tests.serving import run_tutor

WRK = shutil.which("wrk")

Load = tuple[float, int, int]  # answers/s, 503s with Retry-After, other errors


class CpuSplit(TypedDict):
    """Where the CPU went under a load (`cpu_split`)."""

    loop_ms: float
    other_threads_ms: float
    machine_idle: float


class Pair(TypedDict):
    """An API figure between two runs of the encoder's (`paired`)."""

    api: float
    encoder_before: float
    encoder_after: float
    ratio: float


class ApiFigures(TypedDict, total=False):
    """What `api_figures` measures; `rates` and `cpu_32` per configuration, "batched" and "unbatched"."""

    load_tool: str
    ingest_embedded: int
    ingest_s: float
    ingest_texts_per_s: float
    ingest_wall_s: float
    backend: str
    grade_p50_ms: float
    grade_p99_ms: float
    rates: dict[str, dict[int, Load]]
    cpu_32: dict[str, CpuSplit]
    paired_p50: list[Pair]
    paired_32: list[Pair]
    rss_mb: float
    rss_idle_mb: float
    torch_per_request_32: Load
    ready_s: float
    ready_all_s: list[float]
LUA = Path(__file__).resolve().parent / "wrk_grade.lua"


def grading_key(env: dict[str, str]) -> str:
    """A new API key for the bench, with a rate limit no load reaches."""
    out = run_tutor(env, "keys", "create", "bench", "--rate-limit", "1000000/minute").stdout
    return re.findall(r"(gt_[A-Za-z0-9_-]{43})", out)[0]


def bank_question(base: str) -> str:
    """The id of a bank question the served API knows (the one the loads grade against)."""
    return str(httpx.get(f"{base}/v1/questions", params={"q": "reduce-scatter"}).json()["items"][0]["id"])


def _wrk(base: str, key: str, qid: str, answers: list[str], clients: int, seconds: float) -> dict[str, float]:
    """Run wrk (a C load generator: the client costs the 2 cores little) and parse its RESULT line."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(answers) + "\n")
    env = {**os.environ, "ANSWERS": f.name, "QID": qid, "KEY": key}
    cmd = [str(WRK), f"-t{min(clients, 2)}", f"-c{clients}", f"-d{seconds:.0f}s", "--timeout", "60s"]
    cmd += ["-s", str(LUA), base]
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, timeout=seconds + 90).stdout
    finally:
        os.unlink(f.name)
    line = next(x for x in out.splitlines() if x.startswith("RESULT "))
    return {k: float(v) for k, v in (item.split("=") for item in line.split()[1:])}


def latency(base: str, key: str, qid: str, answer: str, seconds: float = 10.0) -> tuple[float, float]:
    """p50/p99 ms of POST /v1/grade from one client on one keep-alive connection, always the same answer."""
    if WRK:
        r = _wrk(base, key, qid, [answer], 1, seconds)
        return r["p50_ms"], r["p99_ms"]
    samples = []
    with httpx.Client(base_url=base, headers={"X-API-Key": key}) as http:
        stop = time.perf_counter() + seconds
        while time.perf_counter() < stop:
            start = time.perf_counter()
            res = http.post("/v1/grade", json={"question_id": qid, "answer": answer})
            samples.append(time.perf_counter() - start)
            assert res.status_code == 200, res.text
    return percentiles(samples[20:])


def throughput(base: str, key: str, qid: str, clients: int, seconds: float = 10.0) -> Load:
    """Answers graded per second with `clients` concurrent clients; (rate, 503s with Retry-After, other errors)."""
    answers = dev_answers()
    if WRK:
        r = _wrk(base, key, qid, answers, clients, seconds)
        return r["ok"] / r["seconds"], int(r["overloaded"]), int(r["other"] + r["socket_errors"])
    done, overloaded, errors = [0], [0], [0]
    stop = time.perf_counter() + seconds
    lock = threading.Lock()

    def client(idx: int) -> None:
        with httpx.Client(base_url=base, headers={"X-API-Key": key}, timeout=60) as http:
            i = idx
            while time.perf_counter() < stop:
                res = http.post("/v1/grade", json={"question_id": qid, "answer": answers[i % len(answers)]})
                i += clients
                with lock:
                    if res.status_code == 200:
                        done[0] += 1
                    elif res.status_code == 503 and res.headers.get("Retry-After"):
                        overloaded[0] += 1
                    else:
                        errors[0] += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return done[0] / (time.perf_counter() - start), overloaded[0], errors[0]


def cpu_split(pid: int, load: Callable[[], Load], seconds: float = 10.0) -> tuple[Load, CpuSplit]:
    """Run `load` and say where the CPU went: ms per answer on the event loop (the main thread) and
    on the other threads (encoder workers, group writer), and the share of the machine left idle."""
    proc = psutil.Process(pid)

    def threads() -> dict[int, float]:
        return {t.id: t.user_time + t.system_time for t in proc.threads()}

    before, idle_before = threads(), psutil.cpu_times()
    result = load()
    after, idle_after = threads(), psutil.cpu_times()
    answers = max(result[0] * seconds, 1.0)
    spent = {tid: cpu - before.get(tid, 0.0) for tid, cpu in after.items()}
    loop = spent.get(pid, 0.0)
    total = sum(idle_after) - sum(idle_before)
    idle = (idle_after.idle - idle_before.idle) / total if total > 0 else 0.0
    return result, {"loop_ms": 1000 * loop / answers, "other_threads_ms": 1000 * (sum(spent.values()) - loop) / answers,
                    "machine_idle": idle}


def p50_one_client(base: str, key: str, qid: str) -> float:
    """`latency`'s p50 over 5 s: one side of the paired p50 ratio."""
    return latency(base, key, qid, ANSWER, 5.0)[0]


def rate_32_clients(base: str, key: str, qid: str) -> float:
    """Answers/s at 32 clients: one side of the paired throughput ratio."""
    return throughput(base, key, qid, 32)[0]


def paired(api: Callable[[], float], encoder: Callable[[], float], rounds: int = 3) -> list[Pair]:
    """An API figure measured between two runs of the encoder's, `rounds` times; each pair's ratio is
    the API's figure over the mean of the two encoder figures around it."""
    out: list[Pair] = []
    for _ in range(rounds):
        before = encoder()
        figure = api()
        after = encoder()
        out.append({"api": figure, "encoder_before": before, "encoder_after": after,
                    "ratio": 2 * figure / (before + after)})
    return out


def api_figures(levels: tuple[int, ...] = (1, 8, 32, 64), probe: EncoderProbe | None = None) -> ApiFigures:
    """Every API figure in one run, for batching on and off; with a `probe`, the one-client p50 and the
    32-client rate are measured again, each between two runs of the encoder (`paired`)."""
    out: ApiFigures = {"load_tool": "wrk" if WRK else "python httpx threads (install wrk for fair figures)",
                       "rates": {}, "cpu_32": {}}
    with prepared_data() as data:
        start = time.perf_counter()
        fresh = data.parent / "fresh"
        fresh.mkdir()
        out["ingest_embedded"], out["ingest_s"] = _ingest_rate(data, fresh)
        out["ingest_texts_per_s"] = out["ingest_embedded"] / out["ingest_s"]
        out["ingest_wall_s"] = time.perf_counter() - start
        for label, extra in (("batched", {}), ("unbatched", {"TUTOR_BATCH_MAX": "1", "TUTOR_BATCH_WAIT_MS": "0"})):
            env = bench_env(data, **extra)
            key = grading_key(env)
            with served(env) as (base, proc, ready_s):
                qid = bank_question(base)
                if label == "batched":
                    out["grade_p50_ms"], out["grade_p99_ms"] = latency(base, key, qid, ANSWER)
                    out["backend"] = httpx.get(f"{base}/readyz").json()["backend"]
                rates = {c: throughput(base, key, qid, c) for c in levels if c != 32}
                # 32 clients always, with where the CPU went
                rates[32], out["cpu_32"][label] = cpu_split(proc.pid, partial(throughput, base, key, qid, 32))
                out["rates"][label] = dict(sorted(rates.items()))
                if label == "batched" and probe is not None:
                    out["paired_p50"] = paired(partial(p50_one_client, base, key, qid), probe.lone_p50_ms)
                    out["paired_32"] = paired(partial(rate_32_clients, base, key, qid), probe.rate)
                if label == "batched":
                    out["rss_mb"] = psutil.Process(proc.pid).memory_info().rss / 2**20  # after the load
                    time.sleep(TRIM_S + 1)  # and once the housekeeping thread has handed freed memory back
                    out["rss_idle_mb"] = psutil.Process(proc.pid).memory_info().rss / 2**20
        # The baseline before the fast path: PyTorch, one request's answer encoded at a time.
        env = bench_env(data, TUTOR_ENCODER_BACKEND="torch", TUTOR_BATCH_MAX="1", TUTOR_ENCODER_WORKERS="1")
        key = grading_key(env)
        with served(env) as (base, _, _):
            out["torch_per_request_32"] = throughput(base, key, bank_question(base), 32)
        starts = []
        for _ in range(3):
            with served(bench_env(data)) as (_, _, ready_s):
                starts.append(ready_s)
        out["ready_s"] = sorted(starts)[1]
        out["ready_all_s"] = starts
    return out


def _ingest_rate(data: Path, fresh: Path) -> tuple[int, float]:
    """Texts embedded, and seconds taken, by a first ingestion into an empty database (PyTorch encoder)."""
    for name in ("raw", "taxonomy.yaml", "annotations.yaml"):
        src = data / name
        if src.is_dir():
            shutil.copytree(src, fresh / name)
        else:
            shutil.copy(src, fresh / name)
    env = bench_env(fresh, TUTOR_EXPORT_ONNX="false")
    start = time.perf_counter()
    summary = json.loads(run_tutor(env, "ingest", "--json").stdout)
    return int(summary["embedded"]), time.perf_counter() - start


if __name__ == "__main__":
    print(json.dumps(api_figures(), indent=1, default=str))
