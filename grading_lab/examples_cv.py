"""Grading with a question's labelled examples, as the public "unseen answers" splits are graded.

Those splits give a question's training answers, with their labels, as the inline form's
`examples`, and grade new answers to the same question. This module simulates that on the
SemEval-2013 training splits (data/asag/) without their test splits: each question's answers are
cut into EXAMPLE_FOLDS folds, and the answers of one fold are graded through the served path
(`grade_many` with the default graders) against the question with the other folds' answers as
labelled examples. Every answer is graded exactly once, by a rubric that has not seen it.

`simulate` keeps, per answer, what the served decision reads, so that the verdicts can be read
again with another example head (app/grading/examples.py); grading_lab/examples_fit.py fits that
head with cross-validation grouped by question.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.grading import Graders, GradingItem, Rubric, plan_many, prepare_many
from app.grading.decision import Decision, load_decision
from app.grading.examples import ExampleHead, example_features, head_input, usable
from app.grading.grader import Judged, decide, decision_input, vetoed
from grading_lab.asag import ASAG_DIR, caching_encoder
from ingest.embedder import Encoder

EXAMPLE_FOLDS = 5
SEED = 13


@dataclass
class Simulated:
    """Each answer of a corpus graded against its question with the other folds' answers as examples."""

    corpus: str
    groups: list[str]  # the question of each answer
    correct: np.ndarray  # the 2-way label: 1 when correct
    settled: list[str]  # the verdict of answers the checks settle before the encode ("" for the rest)
    cases: dict[int, tuple[Rubric, str, Judged]]  # what `decide` needs of every other answer
    decision: Decision

    def verdicts(self, head: ExampleHead | None, rows: Iterable[int] | None = None) -> list[str]:
        """The served verdict of each answer (of `rows`, if given) with this example head (None: without)."""
        out = []
        for i in range(len(self.groups)) if rows is None else rows:
            if i not in self.cases:
                out.append(self.settled[i])
                continue
            rubric, text, (ev, on_refs, on_wrongs) = self.cases[i]
            out.append(decide(rubric, text, ev, on_refs, on_wrongs, self.decision, head).verdict)
        return out

    def head_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """The answers the example head weighs (indices) and its input for each."""
        rows, x = [], []
        for i, (rubric, _, (ev, on_refs, on_wrongs)) in sorted(self.cases.items()):
            probs = self.decision.probabilities(decision_input(ev, on_refs, on_wrongs))
            if vetoed(ev) or ev.adopted is not None or not usable(rubric):
                continue
            rows.append(i)
            x.append(head_input(probs, example_features(rubric, ev.sig.example_sims)))
        return np.array(rows, dtype=int), np.array(x)


def split_rows(corpus: str) -> list[dict[str, Any]]:
    text = (ASAG_DIR / f"{corpus}_train.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _folds(rows: list[dict[str, Any]], folds: int, seed: int) -> list[int]:
    """A fold per answer: each question's answers shuffled and dealt round-robin."""
    by_question: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_question.setdefault(str(r["question_id"]), []).append(i)
    fold = [0] * len(rows)
    rng = random.Random(seed)
    for q in sorted(by_question):
        idx = by_question[q]
        rng.shuffle(idx)
        for k, i in enumerate(idx):
            fold[i] = k % folds
    return fold


def simulate(corpus: str, encoder: Encoder, graders: Graders | None = None, folds: int = EXAMPLE_FOLDS,
             seed: int = SEED, with_examples: bool = True, rows: list[dict[str, Any]] | None = None) -> Simulated:
    """Grade every answer of a training split against its question, the other folds' answers (with their
    2-way labels) passed as labelled examples; `with_examples=False` passes none (the unseen-questions case).
    `rows`: the split's answers, when not the whole file."""
    rows = split_rows(corpus) if rows is None else rows
    cached = caching_encoder(encoder, corpus)
    fold = _folds(rows, folds, seed)
    by_question: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_question.setdefault(str(r["question_id"]), []).append(i)
    items: dict[tuple[str, int], GradingItem] = {}
    for q, idx in by_question.items():
        first = rows[idx[0]]
        for k in range(folds if with_examples else 1):
            examples = [(str(rows[i]["student_answer"]), str(rows[i]["label_2way"])) for i in idx
                        if with_examples and fold[i] != k]
            items[(q, k)] = GradingItem(str(first["question"]), [str(a) for a in first["reference_answers"]],
                                        examples=examples, key=f"{q}#{k}")
    keys = sorted(items)
    rubrics = dict(zip(keys, prepare_many([items[k] for k in keys], cached), strict=True))
    cached.save()
    graders = graders or Graders()
    decision = graders.decision or load_decision()
    targets = [rubrics[(str(r["question_id"]), f if with_examples else 0)] for r, f in zip(rows, fold, strict=True)]
    plan = plan_many(targets, [str(r["student_answer"]) for r in rows])
    vecs = cached.encode(plan.texts)
    settled = [p.result.verdict if p.result is not None else "" for p in plan.pendings]
    cases = {i: (targets[i], text, judged)
             for i, text, judged in zip(plan.todo, plan.texts, plan.evidence(vecs, graders), strict=True)}
    return Simulated(corpus, [str(r["question_id"]) for r in rows],
                     np.array([r["label_2way"] == "correct" for r in rows], dtype=float), settled, cases, decision)
