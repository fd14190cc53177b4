"""Grading throughput with the real model: rubric building for the bank and batched grading."""

from __future__ import annotations

import json
import time
from pathlib import Path

from app.grading import grade, grade_many, prepare_many
from grading_lab.evaluation import DATA_DIR, bank_items
from ingest.embedder import SentenceTransformerEncoder


def main() -> None:
    """Print timings for prepare_many over the seeds, grade() one by one and grade_many."""
    encoder = SentenceTransformerEncoder()
    items = bank_items()
    keys = sorted(items)
    start = time.perf_counter()
    rubrics = dict(zip(keys, prepare_many([items[k] for k in keys], encoder), strict=True))
    print(f"prepare_many: {len(keys)} questions in {time.perf_counter() - start:.2f}s")
    dev = DATA_DIR / "eval" / "dev.jsonl"
    rows = [json.loads(line) for line in Path(dev).read_text().splitlines() if line.strip()]
    pairs = [(rubrics[(r["file"], int(r["number"]))], r["answer"]) for r in rows]
    start = time.perf_counter()
    grade_many([r for r, _ in pairs], [a for _, a in pairs], encoder)
    batched = time.perf_counter() - start
    print(f"grade_many: {len(pairs)} answers in {batched:.2f}s ({len(pairs) / batched:.0f}/s)")
    start = time.perf_counter()
    for rubric, answer in pairs[:50]:
        grade(rubric, answer, encoder)
    single = (time.perf_counter() - start) / 50
    print(f"grade: {single * 1000:.1f} ms per answer (one encoder call each)")


if __name__ == "__main__":
    main()
