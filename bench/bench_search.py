"""Search latency and recall@10 against exact search at 1k, 10k and 100k synthetic items."""

from __future__ import annotations

import os
import time

import faiss
import numpy as np
from common import percentiles

from ingest.index import build_index, recall_at_10

DIM = 384


def synthetic(n: int, seed: int) -> np.ndarray:
    """Clustered unit vectors shaped like sentence embeddings (many topics, near-duplicates inside)."""
    centres = np.random.default_rng(42).normal(size=(max(10, n // 50), DIM))
    rng = np.random.default_rng(seed)
    v = centres[rng.integers(0, len(centres), n)] + 0.6 * rng.normal(size=(n, DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def search_figures(sizes: tuple[int, ...] = (1_000, 10_000, 100_000)) -> list[dict[str, float | str]]:
    """For each size: index type, build seconds, single-query p50/p99 and recall@10 on unseen queries."""
    rows: list[dict[str, float | str]] = []
    for n in sizes:
        vectors = synthetic(n, seed=1)
        faiss.omp_set_num_threads(os.cpu_count() or 1)
        start = time.perf_counter()
        index, info = build_index(DIM, vectors)
        build = time.perf_counter() - start
        queries = synthetic(300, seed=2)
        faiss.omp_set_num_threads(1)  # as the service searches: one query, one thread
        times = []
        for q in queries:
            t = time.perf_counter()
            index.search(q[None, :], 10)
            times.append(time.perf_counter() - t)
        p50, p99 = percentiles(times)
        rows.append({"n": n, "type": str(info["index_type"]), "build_s": build, "p50_ms": p50, "p99_ms": p99,
                     "recall10": recall_at_10(index, vectors, queries)})
    return rows


if __name__ == "__main__":
    for r in search_figures():
        print(f"{r['n']:>7,} items  {r['type']:14s} build {r['build_s']:.1f} s  p50 {r['p50_ms']:.3f} ms  "
              f"p99 {r['p99_ms']:.3f} ms  recall@10 {r['recall10']:.3f}")
