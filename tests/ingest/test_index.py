"""Index choice by size: exact search for small banks, HNSW with checked recall for large ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ingest.index import IndexEntry, build_index, load_index, recall_at_10, write_index


def _vectors(n: int, dim: int = 32, seed: int = 1) -> np.ndarray:
    """Clustered unit vectors; the clusters are the same for every seed, the points are not."""
    centres = np.random.default_rng(1).normal(size=(50, dim))
    rng = np.random.default_rng(seed)
    v = centres[rng.integers(0, 50, n)] + 0.5 * rng.normal(size=(n, dim))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def test_small_banks_use_exact_search() -> None:
    index, info = build_index(32, _vectors(500))
    assert info == {"index_type": "IndexFlatIP"} and index.ntotal == 500


def test_large_banks_use_hnsw_with_recall_checked_against_exact() -> None:
    vectors = _vectors(6000)
    index, info = build_index(32, vectors, exact_up_to=1000)
    assert info["index_type"] == "IndexHNSWFlat"
    assert info["recall_at_10"] >= 0.95
    fresh_queries = _vectors(300, seed=7)
    assert recall_at_10(index, vectors, fresh_queries) >= 0.9  # unseen queries, not the tuning ones


def test_hnsw_search_settings_survive_a_reload(tmp_path: Path) -> None:
    vectors = _vectors(3000)
    entries = [IndexEntry(f"q_{i}", "question", f"h{i}") for i in range(3000)]
    version = write_index(tmp_path, "m@1", 32, entries, vectors, exact_up_to=1000)
    loaded = load_index(tmp_path, version, "m@1", 32)
    assert loaded.manifest["index_type"] == "IndexHNSWFlat"
    assert loaded.index.hnsw.efSearch == loaded.manifest["ef_search"]
    assert np.allclose(loaded.vectors_at([5])[0], vectors[5])
