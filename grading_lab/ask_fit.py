"""Fit the ask path's relevance head on the tuning set, with grouped cross-validation by topic.

    tutor models fit-ask            # cross-validated figures only
    tutor models fit-ask --write    # and write models/ask/relevance.json

The tuning set is `data/train/ask_dev.jsonl`; the frozen evaluation set `data/eval/ask.jsonl` is
never read here. Folds keep a topic's questions together (answerable ones by topic, on-domain gaps
by their nearest topic), so a fold's figures are on topics the head was not fitted on. The decision
threshold is chosen inside each fold's training part, as it is for the final head on the whole set:
the threshold that maximises the F1 of abstention.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from app.ask.relevance import FEATURES, RELEVANCE_PATH, RelevanceHead
from app.config import DATA_DIR
from grading_lab.ask_eval import Observation, figures
from grading_lab.logreg import fit_logistic, standardiser

TUNING_SET = DATA_DIR / "train" / "ask_dev.jsonl"
FOLDS = 6
L2 = 1.0
SEED = 7
VERSION = "ask-relevance-1"


def _threshold(p: np.ndarray, answerable: np.ndarray) -> float:
    """The probability cut that maximises the F1 of abstention (refuse below it)."""
    best, best_f1 = 0.5, -1.0
    for t in np.unique(np.concatenate([p, [0.5]])):
        refuse = p < t
        tp = float(np.sum(refuse & ~answerable))
        precision = tp / max(1.0, float(refuse.sum()))
        recall = tp / max(1.0, float((~answerable).sum()))
        f1 = 2 * precision * recall / max(1e-9, precision + recall)
        if f1 > best_f1 + 1e-12:
            best, best_f1 = float(t), f1
    return best


def fit(observations: list[Observation], l2: float = L2) -> RelevanceHead:
    x = np.stack([o.x for o in observations])
    y = np.array([o.answerable for o in observations], dtype=float)
    mean, scale = standardiser(x)
    weights, bias = fit_logistic((x - mean) / scale, y, l2=l2)
    head = RelevanceHead(mean, scale, weights, bias, 0.5, VERSION)
    p = np.array([head.probability(v) for v in x])
    return RelevanceHead(mean, scale, weights, bias, _threshold(p, y > 0.5), VERSION)


def folds_of(observations: list[Observation], folds: int = FOLDS, seed: int = SEED) -> np.ndarray:
    """A fold per question: whole groups (topics) shuffled into folds."""
    groups = sorted({o.group for o in observations})
    order = np.random.default_rng(seed).permutation(len(groups))
    fold_of = {groups[i]: n % folds for n, i in enumerate(order)}
    return np.array([fold_of[o.group] for o in observations])


def crossval(observations: list[Observation], folds: int = FOLDS, l2: float = L2) -> dict[str, Any]:
    """Out-of-fold decisions for every question, and the figures they give."""
    assignment = folds_of(observations, folds)
    answered = [False] * len(observations)
    for f in range(folds):
        train = [o for o, a in zip(observations, assignment, strict=True) if a != f]
        head = fit(train, l2)
        for i, o in enumerate(observations):
            if assignment[i] == f:
                answered[i] = head.answers(o.x)[0]
    return figures(observations, answered)


def fit_and_report(observations: list[Observation], items: list[dict[str, Any]], index_version: str,
                   write: bool) -> dict[str, Any]:
    """Grouped-CV and in-sample figures of the head on the tuning set; with `write`, the head and its
    manifest (recipe, data hash, figures) in models/ask/relevance.json."""
    cv = crossval(observations)
    head = fit(observations)
    in_sample = figures(observations, [head.answers(o.x)[0] for o in observations])
    if write:
        RELEVANCE_PATH.parent.mkdir(parents=True, exist_ok=True)
        manifest = {
            "head": head.as_json(),
            "recipe": {"features": list(FEATURES), "model": "logistic regression, L2, balanced classes",
                       "l2": L2, "threshold": "maximises abstention F1 on the tuning set",
                       "command": "tutor models fit-ask --write"},
            "data": {"tuning_set": str(TUNING_SET.relative_to(DATA_DIR.parent)),
                     "sha256": hashlib.sha256(TUNING_SET.read_bytes()).hexdigest(), "questions": len(items),
                     "index_version": index_version},
            "figures": {"grouped_cv": {k: v for k, v in cv.items() if k != "by_group"}, "folds": FOLDS,
                        "in_sample": {k: v for k, v in in_sample.items() if k != "by_group"}},
        }
        RELEVANCE_PATH.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return {"grouped_cv": cv, "in_sample": in_sample}
