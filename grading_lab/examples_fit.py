"""Fit the example head on the SemEval-2013 training splits: `python -m grading_lab.examples_fit`.

Each training split, and the dev set, is graded as the public "unseen answers" splits are graded
from outside (grading_lab/examples_cv.py: a question's other answers, with their labels, passed as
labelled examples). The head (app/grading/examples.py) learns P(correct) from the decision's
probabilities and the example features, the three sets weighing the same (the dev set's contrasts
are where closeness misleads). Its figures come from cross-validation grouped by question over
the sets pooled (no question's answers are in both the fit and the figure), and from the other
sets' fit. The pair judge was trained on Beetle's training split, so Beetle's figures read answers
the judge has seen; the decision was fitted on the dev set, so the dev set's figures read a
decision that has seen its answers; SciEntsBank's read neither.
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.grading.decision import VERDICTS
from app.grading.examples import EXAMPLES_PATH, INPUTS, MIN_EXAMPLES, NEAREST, TEMPERATURE, ExampleHead
from app.grading.heads import H, T
from grading_lab.asag import ASAG_DIR, CORPORA
from grading_lab.examples_cv import DEV_PATH, EXAMPLE_FOLDS, SEED, Simulated, simulate, simulate_dev
from grading_lab.logreg import fit_logistic, macro_f1, standardiser
from ingest.embedder import Encoder
from ingest.identity import file_sha256

HEAD_VERSION = "examples-9"
L2 = 1.0
FOLDS = 5  # folds of questions for the head's own cross-validation


def fit_head(sims: list[Simulated], keep: list[set[str]] | None = None) -> ExampleHead:
    """The head fitted on the answers it weighs, of the questions in `keep` (per corpus; all if None). One line
    for every set: one line per set (grading_lab/foreign_fit.py: `fit_styled`) was measured and not kept
    (docs/GRADING_LOG.md, "One line per style of question (foreign-10)")."""
    return fit_logistic_head(ExampleHead, HEAD_VERSION, [s.head_rows() for s in sims], sims, keep)


def decision_of(sims: list[Simulated]) -> str:
    """The version of the decision every set was graded with, which a head fitted on them reads again."""
    versions = {s.decision.version for s in sims}
    if len(versions) != 1:
        raise ValueError(f"the sets were graded with different decisions: {sorted(versions)}")
    return versions.pop()


def fit_logistic_head(cls: type[H], version: str, weighed: list[tuple[np.ndarray, np.ndarray]],
                      sims: list[Simulated], keep: list[set[str]] | None = None, l2: float = L2,
                      targets: list[np.ndarray] | None = None) -> H:
    """A head of class `cls` fitted on P(correct) (or P(target), per set: 1 or 0 for each of its answers) of
    the answers each set's head weighs (`weighed`: per set, their indices and inputs), of the questions in
    `keep` (per set; all if None). Each set weighs the same in all, and within a set both classes weigh the
    same."""
    xs, ys, ws = [], [], []
    for n, (sim, (rows, x)) in enumerate(zip(sims, weighed, strict=True)):
        if keep is not None:
            mask = np.array([sim.groups[i] in keep[n] for i in rows], dtype=bool)
            rows, x = rows[mask], x[mask]
        y = (sim.correct if targets is None else targets[n])[rows]
        xs.append(x)
        ys.append(y)
        ws.append(_balanced(y) / max(1, len(rows)))
    x, y, weight = np.vstack(xs), np.concatenate(ys), np.concatenate(ws)
    mean, scale = standardiser(x)
    w, b = fit_logistic((x - mean) / scale, y, l2=l2, sample_weight=weight * len(y) / len(sims))
    return cls(mean, scale, w, float(b), version)


def _balanced(y: np.ndarray) -> np.ndarray:
    """Weights that give both classes the same total (1 in all)."""
    pos, neg = max(1.0, float(y.sum())), max(1.0, float(len(y) - y.sum()))
    return np.where(y > 0.5, 0.5 / pos, 0.5 / neg) * len(y)


def f1_2way(sim: Simulated, verdicts: list[str], rows: list[int] | None = None) -> float:
    """Correct-vs-not macro-F1 of verdicts (of `rows`, or every answer)."""
    idx = range(len(sim.groups)) if rows is None else rows
    truth = ["c" if sim.correct[i] else "i" for i in idx]
    return macro_f1(truth, ["c" if v == "correct" else "i" for v in verdicts], ["c", "i"])


@dataclass
class HeadFigures:
    """Correct-vs-not macro-F1 per split: the served decision alone, and with the head in grouped CV."""

    without_head: dict[str, float]
    grouped_cv: dict[str, float]
    grouped_cv_3way: dict[str, float]  # 3-way macro-F1, for a set with 3-way labels (dev)
    cross_split: dict[str, float]  # each split graded by the head fitted on the other
    rows: dict[str, int]  # answers the head weighs, per split
    confusion: dict[str, dict[str, int]]  # per split, "label->verdict" counts of the grouped-CV verdicts

    def to_dict(self) -> dict[str, Any]:
        """The figures, rounded, as the manifest records them."""
        r = lambda d: {k: round(v, 4) for k, v in d.items()}  # noqa: E731
        return {"without_head": r(self.without_head), "grouped_cv": r(self.grouped_cv),
                "grouped_cv_3way": r(self.grouped_cv_3way),
                "cross_split": r(self.cross_split), "rows": self.rows, "confusion": self.confusion}


def _confusion(sim: Simulated, verdicts: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for y, v in zip(sim.correct, verdicts, strict=True):
        key = f"{'correct' if y else 'incorrect'}->{v}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


Grouping = Callable[[str, str], str]  # (set, question) -> the group a fold holds out whole


def by_question(corpus: str, question: str) -> str:
    return question


def grouped_verdicts(sims: list[Simulated], fit: Callable[[list[Simulated], list[set[str]]], T],
                     verdicts: Callable[[Simulated, T, list[int]], list[str]], group: Grouping = by_question,
                     folds: int = FOLDS, seed: int = SEED) -> list[list[str]]:
    """Every answer's verdict (per set) from a head fitted without its group's answers: folds of groups,
    all sets pooled. `fit` fits a head on the questions kept per set; `verdicts` grades a set's rows with it."""
    keys = sorted({(n, group(s.corpus, g)) for n, s in enumerate(sims) for g in s.groups})
    random.Random(seed).shuffle(keys)
    fold_of = {k: i % folds for i, k in enumerate(keys)}
    predicted = [[""] * len(s.groups) for s in sims]
    for k in range(folds):
        head = fit(sims, [{g for g in s.groups if fold_of[(n, group(s.corpus, g))] != k} for n, s in enumerate(sims)])
        for n, s in enumerate(sims):
            rows = [i for i, g in enumerate(s.groups) if fold_of[(n, group(s.corpus, g))] == k]
            for i, v in zip(rows, verdicts(s, head, rows), strict=True):
                predicted[n][i] = v
    return predicted


def grouped_cv(sims: list[Simulated], folds: int = FOLDS, seed: int = SEED) -> HeadFigures:
    """The head's figures: folds of questions over the splits pooled, and each split by the other's fit."""
    predicted = grouped_verdicts(sims, fit_head, lambda s, head, rows: s.verdicts(head, rows), folds=folds, seed=seed)
    cross = {}
    for n, sim in enumerate(sims):
        others = [s for m, s in enumerate(sims) if m != n]
        if others:
            cross[sim.corpus] = f1_2way(sim, sim.verdicts(fit_head(others)))
    three = {}
    for n, sim in enumerate(sims):
        if "partial" in sim.labels:
            three[sim.corpus] = macro_f1(sim.labels, predicted[n], list(VERDICTS))
            three[f"{sim.corpus}_without_head"] = macro_f1(sim.labels, sim.verdicts(None), list(VERDICTS))
    return HeadFigures({s.corpus: f1_2way(s, s.verdicts(None)) for s in sims},
                       {s.corpus: f1_2way(s, predicted[n]) for n, s in enumerate(sims)}, three, cross,
                       {s.corpus: len(s.head_rows()[0]) for s in sims},
                       {s.corpus: _confusion(s, predicted[n]) for n, s in enumerate(sims)})


def manifest(head: ExampleHead, figures: HeadFigures, decision: str) -> dict[str, Any]:
    """examples.json: the head's weights, the version of the decision it reads again (`decision`: a refit of
    that decision calls for a refit of the head), the recipe, the data's hashes and the figures."""
    return {**head.to_dict(),
            "decision": decision,
            "recipe": {"l2": L2, "folds": FOLDS, "example_folds": EXAMPLE_FOLDS, "seed": SEED,
                       "min_examples": MIN_EXAMPLES, "nearest": NEAREST, "temperature": TEMPERATURE,
                       "inputs": list(INPUTS),
                       "labels": "the ASAG splits' 2-way labels (examples correct/incorrect); dev's 3-way labels"},
            "data": {**{f"{c}_train.jsonl": file_sha256(ASAG_DIR / f"{c}_train.jsonl") for c in CORPORA},
                     "dev.jsonl": file_sha256(DEV_PATH)},
            "figures": figures.to_dict()}


def fit(encoder: Encoder) -> tuple[ExampleHead, HeadFigures, str]:
    """Simulate both splits and the dev set, measure the head in grouped CV and fit it on everything; with the
    version of the decision the simulations were graded with."""
    sims = [*(simulate(c, encoder) for c in CORPORA), simulate_dev(encoder)]
    return fit_head(sims), grouped_cv(sims), decision_of(sims)


def without_examples(encoder: Encoder) -> dict[str, dict[str, float]]:
    """Correct-vs-not macro-F1 of the served grader given no examples (as the unseen-questions splits are
    graded), per split: with the foreign head (as served) and by the decision alone."""
    from app.grading.foreign import load_foreign

    out = {}
    for corpus in CORPORA:
        sim = simulate(corpus, encoder, with_examples=False)
        out[corpus] = {"served": f1_2way(sim, sim.verdicts(None, foreign=load_foreign())),
                       "decision_alone": f1_2way(sim, sim.verdicts(None))}
    return out


def main(argv: list[str] | None = None) -> None:
    """Fit, print the figures and write app/grading/examples.json (`--check`: print only)."""
    from ingest.embedder import SentenceTransformerEncoder

    args = sys.argv[1:] if argv is None else argv
    head, figures, decision = fit(SentenceTransformerEncoder())
    print(json.dumps(figures.to_dict(), indent=1))
    if "--check" not in args:
        EXAMPLES_PATH.write_text(json.dumps(manifest(head, figures, decision), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {EXAMPLES_PATH}")


if __name__ == "__main__":
    main()
