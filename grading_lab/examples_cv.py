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
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from app.config import DATA_DIR
from app.grading import Graders, GradingItem, Rubric, plan_many, prepare_many
from app.grading.decision import Decision, load_decision
from app.grading.examples import INPUTS, ExampleHead, example_features, head_input, usable
from app.grading.foreign import INPUTS as FOREIGN_INPUTS
from app.grading.foreign import ForeignHead, applies
from app.grading.foreign import head_input as foreign_input
from app.grading.grader import Judged, decide, decision_input, vetoed
from app.grading.judge import Evidence
from app.grading.rubric import attach_neighbours
from grading_lab.asag import ASAG_DIR, caching_encoder
from ingest.embedder import Encoder

EXAMPLE_FOLDS = 5
# How many labelled examples a teacher passes for a question: the public splits pass a question's every training
# answer (Beetle about 80, SciEntsBank about 30), a course that marked last year's answers a dozen or so.
TEACHER = (8, 16)
DEV_PATH = DATA_DIR / "eval" / "dev.jsonl"
# Answers to questions outside the bank, each row with its question and accepted answers (data/train/README.md).
INLINE_PATH = DATA_DIR / "train" / "inline_answers.jsonl"
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
    labels: list[str]  # each answer's label as its file gives it (2-way for the ASAG splits, 3-way for dev)

    def verdicts(self, head: ExampleHead | None, rows: Iterable[int] | None = None,
                 foreign: ForeignHead | None = None) -> list[str]:
        """The served verdict of each answer (of `rows`, if given) with this example head and foreign head
        (None: without)."""
        out = []
        for i in range(len(self.groups)) if rows is None else rows:
            if i not in self.cases:
                out.append(self.settled[i])
                continue
            rubric, text, (ev, on_refs, on_wrongs) = self.cases[i]
            out.append(decide(rubric, text, ev, on_refs, on_wrongs, self.decision, head, foreign).verdict)
        return out

    def head_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """The answers the example head weighs (indices) and its input for each."""
        return self._weighed(usable, lambda rubric, ev, probs, _: head_input(
            probs, example_features(rubric, ev.sig.example_sims, ev.sig.stems, ev.sig.example_words)),
            len(INPUTS))

    def foreign_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """The answers the foreign head weighs (indices) and its input for each."""
        return self._weighed(applies, lambda _, ev, probs, x: foreign_input(probs, x), len(FOREIGN_INPUTS))

    def _weighed(self, weighs: Callable[[Rubric], bool],
                 head_input_of: Callable[[Rubric, Evidence, np.ndarray, np.ndarray], np.ndarray],
                 width: int) -> tuple[np.ndarray, np.ndarray]:
        """The answers a head weighs (those no sure check settles, on a question it `weighs`) and its input
        for each, from the rubric, the evidence and the decision's probabilities and input."""
        rows, xs = [], []
        for i, (rubric, _, (ev, on_refs, on_wrongs)) in sorted(self.cases.items()):
            if vetoed(ev) or ev.adopted is not None or not weighs(rubric):
                continue
            x = decision_input(ev, on_refs, on_wrongs)
            rows.append(i)
            xs.append(head_input_of(rubric, ev, self.decision.probabilities(x), x))
        return np.array(rows, dtype=int), np.array(xs).reshape(len(rows), width)


def concat(sims: list[Simulated], name: str) -> Simulated:
    """Simulations of one corpus's parts (graded with one decision) as one set, its answers in order."""
    cases: dict[int, tuple[Rubric, str, Judged]] = {}
    offset = 0
    for sim in sims:
        cases.update({offset + i: case for i, case in sim.cases.items()})
        offset += len(sim.groups)
    if len({id(s.decision) for s in sims}) > 1:
        raise ValueError("the parts were graded with different decisions")
    return Simulated(name, [g for s in sims for g in s.groups], np.concatenate([s.correct for s in sims]),
                     [v for s in sims for v in s.settled], cases, sims[0].decision,
                     [label for s in sims for label in s.labels])


def split_rows(corpus: str) -> list[dict[str, Any]]:
    text = (ASAG_DIR / f"{corpus}_train.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _folds(answers: list[Labelled], folds: int, seed: int) -> list[int]:
    """A fold per answer: each question's answers shuffled and dealt round-robin."""
    by_question: dict[str, list[int]] = {}
    for i, a in enumerate(answers):
        by_question.setdefault(a.question, []).append(i)
    fold = [0] * len(answers)
    rng = random.Random(seed)
    for q in sorted(by_question):
        idx = by_question[q]
        rng.shuffle(idx)
        for k, i in enumerate(idx):
            fold[i] = k % folds
    return fold


@dataclass(frozen=True)
class Labelled:
    """One labelled answer to one question, whatever file it comes from."""

    question: str  # the question's key
    answer: str
    label: str  # "correct", "partial" or "incorrect" (the ASAG splits: their 2-way label)


def simulate(corpus: str, encoder: Encoder, graders: Graders | None = None, folds: int = EXAMPLE_FOLDS,
             seed: int = SEED, with_examples: bool = True, rows: list[dict[str, Any]] | None = None,
             teacher: tuple[int, int] | None = None) -> Simulated:
    """Grade every answer of a training split against its question, the other folds' answers (with their
    2-way labels) passed as labelled examples; `with_examples=False` passes none (the unseen-questions case).
    `rows`: the split's answers, when not the whole file. `teacher`: the examples drawn at random down to a
    count between these two (a teacher's dozen rather than every other answer)."""
    rows = split_rows(corpus) if rows is None else rows
    items: dict[str, GradingItem] = {}
    for r in rows:
        q = str(r["question_id"])
        if q not in items:
            items[q] = GradingItem(str(r["question"]), [str(a) for a in r["reference_answers"]], key=q)
    answers = [Labelled(str(r["question_id"]), str(r["student_answer"]), str(r["label_2way"])) for r in rows]
    cached = caching_encoder(encoder, corpus)
    sim = simulate_items(corpus, items, answers, cached, graders, folds, seed, with_examples, teacher=teacher)
    cached.save()
    return sim


def simulate_dev(encoder: Encoder, graders: Graders | None = None, folds: int = EXAMPLE_FOLDS,
                 seed: int = SEED, inline: bool = False) -> Simulated:
    """The dev set graded the same way: each bank question (with its neighbours, as served) given the
    other folds' dev answers, with their 3-way labels, as examples. Its answers are contrasts written to
    the labelling rules (a negation beside the right answer it negates), so closeness says little there.

    `inline`: instead, each question as a caller from outside would pass it through the inline form,
    its text and accepted answers only (no wrong options, explanation, neighbours or examples)."""
    from grading_lab.evaluation import MemoEncoder, bank_items

    bank = bank_items()
    rows = [json.loads(line) for line in DEV_PATH.read_text(encoding="utf-8").splitlines() if line.strip()]
    answers = [Labelled(f"{r['file']}#{r['number']}", str(r["answer"]), str(r["label"])) for r in rows]
    if inline:
        items = {f"{f}#{n}": GradingItem(item.question, list(item.reference_answers)) for (f, n), item in bank.items()}
        return simulate_items("dev_inline", items, answers, MemoEncoder(encoder), graders, folds, seed, False)
    items = {f"{f}#{n}": item for (f, n), item in bank.items()}
    return simulate_items("dev", items, answers, MemoEncoder(encoder), graders, folds, seed, True, neighbours=True)


def simulate_inline(encoder: Encoder, path: Path = INLINE_PATH, with_examples: bool = False,
                    teacher: tuple[int, int] | None = None, authors: AbstractSet[str] | None = None) -> Simulated:
    """A labelled file whose rows carry their own question and accepted answers (by default
    data/train/inline_answers.jsonl), each answer graded against its question as the inline form passes it:
    its text and accepted answers only, with no examples (`with_examples`: the other folds' answers to the
    question, as `simulate` passes them; `teacher`: as `simulate`'s). The set is named after the file and
    grouped by `qid`. `authors`: only the questions whose qid starts with one of these letters (each author's
    letter, data/train/README.md)."""
    from grading_lab.evaluation import MemoEncoder, inline_item

    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if authors is None or str(r["qid"])[:1] in authors]
    items = {str(r["qid"]): inline_item(r) for r in rows}
    answers = [Labelled(str(r["qid"]), str(r["answer"]), str(r["label"])) for r in rows]
    return simulate_items(path.stem, items, answers, MemoEncoder(encoder), None, EXAMPLE_FOLDS, SEED, with_examples,
                          teacher=teacher)


def simulate_items(name: str, items: dict[str, GradingItem], answers: list[Labelled], encoder: Encoder,
                   graders: Graders | None, folds: int, seed: int, with_examples: bool,
                   neighbours: bool = False, teacher: tuple[int, int] | None = None) -> Simulated:
    """Grade each answer against its question's item, given the other folds' answers as labelled examples
    (none if not `with_examples`); `neighbours`: the items are a bank, and each rubric gets the others'.
    `teacher`: each question's examples drawn at random (seeded) down to a count between these two."""
    by_question: dict[str, list[int]] = {}
    for i, a in enumerate(answers):
        by_question.setdefault(a.question, []).append(i)
    fold = _folds(answers, folds, seed)
    variants: dict[tuple[str, int], GradingItem] = {}
    drawn = random.Random(f"{seed}:teacher")
    for q, idx in sorted(by_question.items()):
        for k in range(folds if with_examples else 1):
            examples = [(answers[i].answer, answers[i].label) for i in idx if with_examples and fold[i] != k]
            if teacher is not None and len(examples) > teacher[0]:
                examples = drawn.sample(examples, min(len(examples), drawn.randint(*teacher)))
            variants[(q, k)] = replace(items[q], examples=examples, key=q)
    keys = sorted(variants)
    rubrics = dict(zip(keys, prepare_many([variants[k] for k in keys], encoder), strict=True))
    if neighbours:
        attach_neighbours([rubrics[(q, 0)] for q in sorted(by_question)])
        for (q, _), rubric in rubrics.items():
            rubric.neighbours = rubrics[(q, 0)].neighbours
    graders = graders or Graders()
    decision = graders.decision or load_decision()
    targets = [rubrics[(a.question, f if with_examples else 0)] for a, f in zip(answers, fold, strict=True)]
    plan = plan_many(targets, [a.answer for a in answers])
    vecs = encoder.encode(plan.texts) if plan.texts else np.zeros((0, encoder.dim), dtype=np.float32)
    settled = [p.result.verdict if p.result is not None else "" for p in plan.pendings]
    cases = {i: (targets[i], text, judged)
             for i, text, judged in zip(plan.todo, plan.texts, plan.evidence(vecs, graders), strict=True)}
    correct = np.array([a.label == "correct" for a in answers], dtype=float)
    return Simulated(name, [a.question for a in answers], correct, settled, cases, decision,
                     [a.label for a in answers])
