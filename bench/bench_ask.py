"""POST /v1/ask latency, one client, over real HTTP: the study-note passages or "not covered".

Questions are the tuning set's learner questions (data/train/ask_dev.jsonl), sent in turn, so the
answered and the declined paths both count. Printed beside the floor of the same server in the same
run (GET /healthz: HTTP, routing and JSON, no work), and the target (p50 < 25 ms).
"""

from __future__ import annotations

import json
import time

import httpx
from common import ROOT, bench_env, percentiles, prepared_data, served

QUESTIONS = ROOT / "data" / "train" / "ask_dev.jsonl"
TARGET_P50_MS = 25.0


def _questions() -> list[str]:
    return [json.loads(line)["question"] for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line]


def ask_figures(rounds: int = 3) -> dict[str, float]:
    """p50/p99 of /v1/ask (all, answered, declined) and of /healthz on the same server."""
    questions = _questions()
    with prepared_data() as data, served(bench_env(data)) as (base, _, _), httpx.Client(base_url=base) as client:
        for q in questions[:20]:  # warm-up: first calls build the vocabulary and fill caches
            client.post("/v1/ask", json={"text": q}).raise_for_status()
        times: dict[str, list[float]] = {"all": [], "answered": [], "declined": [], "healthz": []}
        for _ in range(rounds):
            for q in questions:
                start = time.perf_counter()
                response = client.post("/v1/ask", json={"text": q})
                took = time.perf_counter() - start
                response.raise_for_status()
                times["all"].append(took)
                times["answered" if response.json()["answered"] else "declined"].append(took)
                start = time.perf_counter()
                client.get("/healthz").raise_for_status()
                times["healthz"].append(time.perf_counter() - start)
    out: dict[str, float] = {"questions": float(len(questions) * rounds)}
    for name, samples in times.items():
        out[f"{name}_p50_ms"], out[f"{name}_p99_ms"] = percentiles(samples)
    return out


def print_ask(f: dict[str, float]) -> None:
    print(f"POST /v1/ask, one client, {f['questions']:.0f} learner questions: p50 {f['all_p50_ms']:.2f} ms, "
          f"p99 {f['all_p99_ms']:.2f} ms (target p50 < {TARGET_P50_MS:.0f} ms: "
          f"{f['all_p50_ms'] / TARGET_P50_MS:.2f} of it)")
    print(f"  answered p50 {f['answered_p50_ms']:.2f} ms, declined p50 {f['declined_p50_ms']:.2f} ms; "
          f"GET /healthz on the same server p50 {f['healthz_p50_ms']:.2f} ms "
          f"(ask / floor: {f['all_p50_ms'] / f['healthz_p50_ms']:.1f})")


if __name__ == "__main__":
    print_ask(ask_figures())
