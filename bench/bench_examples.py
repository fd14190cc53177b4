"""What labelled examples cost an inline grading call, measured in turns.

`python bench/bench_examples.py`: for Beetle questions with 40, 80 and the inline form's most,
200, labelled examples (their training answers), the p50 of preparing the inline rubric and grading
one answer against it, as `POST /v1/grade` does for `{question, reference_answers, examples, answer}`
with every text's vector already in the clients' text cache: with the example head, without it
(`Graders(no_examples=True)`), and with no examples at all. The three are measured in turns over
the same answers, so their ratios hold on a noisy machine.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import replace

from common import p50_ms_each

from app.grading import Graders, GradingItem, grade, prepare
from grading_lab.asag import caching_encoder
from grading_lab.examples_cv import split_rows
from ingest.embedder import Encoder, SentenceTransformerEncoder

ROUNDS = 3
ANSWERS = 20


def _item_and_pool(rows: list[dict[str, object]]) -> tuple[GradingItem, list[tuple[str, str]]]:
    """The question with the most answers, and its answers (repeated to 200) as labelled examples."""
    by_question: dict[str, list[dict[str, object]]] = {}
    for r in rows:
        by_question.setdefault(str(r["question_id"]), []).append(r)
    chosen = max(by_question.values(), key=len)
    pool = [(str(r["student_answer"]), str(r["label_2way"])) for r in chosen]
    while len(pool) < 200:
        pool += [(f"{a} ({len(pool)})", lab) for a, lab in pool[: 200 - len(pool)]]
    first = chosen[0]
    refs = [str(a) for a in first["reference_answers"]]  # type: ignore[attr-defined]
    return GradingItem(str(first["question"]), refs), pool


def _call(item: GradingItem, encoder: Encoder, graders: Graders | None) -> Callable[[str], object]:
    return lambda answer: grade(prepare(item, encoder), answer, encoder, graders=graders)


def main() -> None:
    """Print, per number of examples, the p50 of each way and its ratio to the call without examples."""
    rows = split_rows("beetle")
    encoder = caching_encoder(SentenceTransformerEncoder(), "beetle")
    item, pool = _item_and_pool(rows)
    answers = [str(r["student_answer"]) for r in rows[-ANSWERS:]]
    encoder.encode([*answers, *(a for a, _ in pool), item.question, *item.reference_answers])
    bare = _call(item, encoder, None)
    for n in (40, 80, 200):
        taught = replace(item, examples=pool[:n])
        encoder.encode([a for a, _ in taught.examples])
        ways = {"with the head": _call(taught, encoder, None),
                "examples, no head": _call(taught, encoder, Graders(no_examples=True)), "no examples": bare}
        times: dict[str, list[float]] = {k: [] for k in ways}
        for _ in range(ROUNDS):
            for name, fn in ways.items():
                times[name].append(p50_ms_each(fn, answers))
        base = statistics.median(times["no examples"])
        cells = ", ".join(f"{name} {statistics.median(t):.1f} ms ({statistics.median(t) / base:.2f} x)"
                          for name, t in times.items())
        print(f"{n:3d} examples: {cells}")


if __name__ == "__main__":
    main()
