"""The served API: start-up to ready, resident memory, POST /v1/grade latency and throughput under load."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import httpx
import psutil
from common import bench_env, percentiles, prepared_data, served

from tests.serving import run_tutor

ANSWERS = [
    "it reduces the gradients and each rank keeps one shard of the sum",
    "every rank ends up with the full summed tensor",
    "reduce-scatter sums across ranks then scatters disjoint chunks, FSDP uses it for gradients",
    "no idea",
]


def _key(env: dict[str, str]) -> str:
    out = run_tutor(env, "keys", "create", "bench", "--rate-limit", "1000000/minute").stdout
    return re.findall(r"(gt_[A-Za-z0-9_-]{43})", out)[0]


def _question(base: str) -> str:
    return str(httpx.get(f"{base}/v1/questions", params={"q": "reduce-scatter"}).json()["items"][0]["id"])


def latency(base: str, key: str, qid: str, n: int = 300) -> tuple[float, float]:
    """p50/p99 ms of sequential POST /v1/grade calls over one keep-alive connection."""
    samples = []
    with httpx.Client(base_url=base, headers={"X-API-Key": key}) as http:
        for i in range(n + 20):
            start = time.perf_counter()
            res = http.post("/v1/grade", json={"question_id": qid, "answer": f"{ANSWERS[i % 4]} ({i})"})
            if i >= 20:
                samples.append(time.perf_counter() - start)
            assert res.status_code == 200, res.text
    return percentiles(samples)


def throughput(base: str, key: str, qid: str, clients: int, seconds: float = 6.0) -> tuple[float, int, int]:
    """Answers graded per second with `clients` concurrent clients; (rate, 503s, other errors)."""
    done, overloaded, errors = [0], [0], [0]
    stop = time.perf_counter() + seconds
    lock = threading.Lock()

    def client(idx: int) -> None:
        with httpx.Client(base_url=base, headers={"X-API-Key": key}, timeout=30) as http:
            i = 0
            while time.perf_counter() < stop:
                res = http.post("/v1/grade", json={"question_id": qid, "answer": f"{ANSWERS[i % 4]} {idx}-{i}"})
                i += 1
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


def api_figures(levels: tuple[int, ...] = (1, 8, 32, 64)) -> dict[str, object]:
    """Every API figure in one run, for batching on and off."""
    out: dict[str, object] = {}
    with prepared_data() as data:
        start = time.perf_counter()
        fresh = data.parent / "fresh"
        fresh.mkdir()
        _ingest_rate(data, fresh, out)
        out["ingest_wall_s"] = time.perf_counter() - start
        for label, extra in (("batched", {}), ("unbatched", {"TUTOR_BATCH_MAX": "1", "TUTOR_BATCH_WAIT_MS": "0"})):
            env = bench_env(data, **extra)
            key = _key(env)
            with served(env) as (base, proc, ready_s):
                qid = _question(base)
                if label == "batched":
                    out["ready_s"] = ready_s
                    out["grade_p50_ms"], out["grade_p99_ms"] = latency(base, key, qid)
                    out["rss_mb"] = psutil.Process(proc.pid).memory_info().rss / 2**20
                    out["backend"] = httpx.get(f"{base}/readyz").json()["backend"]
                out[label] = {c: throughput(base, key, qid, c) for c in levels}
    return out


def _ingest_rate(data: Path, fresh: Path, out: dict[str, object]) -> None:
    """Texts embedded per second by a first ingestion into an empty database (PyTorch encoder)."""
    import json
    import shutil

    for name in ("raw", "taxonomy.yaml", "annotations.yaml"):
        src = data / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, fresh / name)
    env = bench_env(fresh, TUTOR_EXPORT_ONNX="false")
    start = time.perf_counter()
    summary = json.loads(run_tutor(env, "ingest", "--json").stdout)
    seconds = time.perf_counter() - start
    out["ingest_embedded"], out["ingest_s"] = summary["embedded"], seconds
    out["ingest_texts_per_s"] = summary["embedded"] / seconds


if __name__ == "__main__":
    import json

    print(json.dumps(api_figures(), indent=1, default=str))
