"""Fit the example head on the SemEval-2013 training splits: `python -m grading_lab.examples_fit`.

Each split is graded as its "unseen answers" test split is graded from outside (grading_lab/
examples_cv.py: a question's other answers, with their 2-way labels, passed as labelled examples).
The head (app/grading/examples.py) learns P(correct) from the decision's probabilities and the
example features. Its figures come from cross-validation grouped by question over both splits
pooled (no question's answers are in both the fit and the figure), and from one split's fit
graded on the other. The pair judge was trained on Beetle's training split, so Beetle's figures
read answers the judge has seen; SciEntsBank's do not.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.grading.examples import EXAMPLES_PATH, INPUTS, MIN_EXAMPLES, NEAREST, TEMPERATURE, ExampleHead
from grading_lab.asag import ASAG_DIR, CORPORA
from grading_lab.examples_cv import EXAMPLE_FOLDS, SEED, Simulated, simulate
from grading_lab.logreg import fit_logistic, macro_f1, standardiser
from ingest.embedder import Encoder
from ingest.identity import file_sha256

HEAD_VERSION = "examples-1"
L2 = 1.0
FOLDS = 5  # folds of questions for the head's own cross-validation


def fit_head(sims: list[Simulated], keep: list[set[str]] | None = None) -> ExampleHead:
    """The head fitted on the answers it weighs, of the questions in `keep` (per corpus; all if None)."""
    xs, ys = [], []
    for n, sim in enumerate(sims):
        rows, x = sim.head_rows()
        if keep is not None:
            mask = np.array([sim.groups[i] in keep[n] for i in rows], dtype=bool)
            rows, x = rows[mask], x[mask]
        xs.append(x)
        ys.append(sim.correct[rows])
    x, y = np.vstack(xs), np.concatenate(ys)
    mean, scale = standardiser(x)
    w, b = fit_logistic((x - mean) / scale, y, l2=L2)
    return ExampleHead(mean, scale, w, float(b), HEAD_VERSION)


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
    cross_split: dict[str, float]  # each split graded by the head fitted on the other
    rows: dict[str, int]  # answers the head weighs, per split
    confusion: dict[str, dict[str, int]]  # per split, "label->verdict" counts of the grouped-CV verdicts

    def to_dict(self) -> dict[str, Any]:
        """The figures, rounded, as the manifest records them."""
        r = lambda d: {k: round(v, 4) for k, v in d.items()}  # noqa: E731
        return {"without_head": r(self.without_head), "grouped_cv": r(self.grouped_cv),
                "cross_split": r(self.cross_split), "rows": self.rows, "confusion": self.confusion}


def _confusion(sim: Simulated, verdicts: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for y, v in zip(sim.correct, verdicts, strict=True):
        key = f"{'correct' if y else 'incorrect'}->{v}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def grouped_cv(sims: list[Simulated], folds: int = FOLDS, seed: int = SEED) -> HeadFigures:
    """The head's figures: folds of questions over the splits pooled, and each split by the other's fit."""
    keys = sorted({(n, g) for n, sim in enumerate(sims) for g in sim.groups})
    random.Random(seed).shuffle(keys)
    fold_of = {k: i % folds for i, k in enumerate(keys)}
    predicted: list[list[str]] = [[""] * len(sim.groups) for sim in sims]
    for k in range(folds):
        keep = [{g for (n2, g), f in fold_of.items() if n2 == n and f != k} for n in range(len(sims))]
        head = fit_head(sims, keep)
        for n, sim in enumerate(sims):
            rows = [i for i, g in enumerate(sim.groups) if fold_of[(n, g)] == k]
            for i, v in zip(rows, sim.verdicts(head, rows), strict=True):
                predicted[n][i] = v
    cross = {}
    for n, sim in enumerate(sims):
        others = [s for m, s in enumerate(sims) if m != n]
        if others:
            cross[sim.corpus] = f1_2way(sim, sim.verdicts(fit_head(others)))
    return HeadFigures({s.corpus: f1_2way(s, s.verdicts(None)) for s in sims},
                       {s.corpus: f1_2way(s, predicted[n]) for n, s in enumerate(sims)}, cross,
                       {s.corpus: len(s.head_rows()[0]) for s in sims},
                       {s.corpus: _confusion(s, predicted[n]) for n, s in enumerate(sims)})


def manifest(head: ExampleHead, figures: HeadFigures) -> dict[str, Any]:
    """examples.json: the head's weights, the recipe, the data's hashes and the figures."""
    return {**head.to_dict(),
            "recipe": {"l2": L2, "folds": FOLDS, "example_folds": EXAMPLE_FOLDS, "seed": SEED,
                       "min_examples": MIN_EXAMPLES, "nearest": NEAREST, "temperature": TEMPERATURE,
                       "inputs": list(INPUTS), "labels": "2-way (label_2way), examples labelled correct/incorrect"},
            "data": {f"{c}_train.jsonl": file_sha256(ASAG_DIR / f"{c}_train.jsonl") for c in CORPORA},
            "figures": figures.to_dict()}


def fit(encoder: Encoder) -> tuple[ExampleHead, HeadFigures]:
    """Simulate both splits, measure the head in grouped CV and fit it on everything."""
    sims = [simulate(c, encoder) for c in CORPORA]
    return fit_head(sims), grouped_cv(sims)


def without_examples(encoder: Encoder) -> dict[str, float]:
    """Correct-vs-not macro-F1 of the served grader given no examples (as the unseen-questions splits are
    graded), per split."""
    out = {}
    for corpus in CORPORA:
        sim = simulate(corpus, encoder, with_examples=False)
        out[corpus] = f1_2way(sim, sim.verdicts(None))
    return out


def main(argv: list[str] | None = None) -> None:
    """Fit, print the figures and write app/grading/examples.json (`--check`: print only)."""
    from ingest.embedder import SentenceTransformerEncoder

    args = sys.argv[1:] if argv is None else argv
    head, figures = fit(SentenceTransformerEncoder())
    print(json.dumps(figures.to_dict(), indent=1))
    if "--check" not in args:
        EXAMPLES_PATH.write_text(json.dumps(manifest(head, figures), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {EXAMPLES_PATH}")


if __name__ == "__main__":
    main()
