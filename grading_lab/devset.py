"""Our labelled dev set as training data for the general model, and cross-validation by question."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.config import DATA_DIR
from app.grading import Graders
from app.grading.build import prepare_many
from app.grading.grader import grade_many
from app.grading.rubric import GradingItem
from grading_lab.asag import CORPORA, Corpus, answer_features, caching_encoder, fit_model, load_corpus
from grading_lab.logreg import macro_f1
from ingest.embedder import Encoder

DEV_PATH = DATA_DIR / "eval" / "dev.jsonl"
LABELS = ["correct", "partial", "incorrect"]


def read_rows(path: Path = DEV_PATH) -> list[dict[str, Any]]:
    """The labelled answers of a dev file."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def _key(row: dict[str, Any]) -> str:
    return f"{row['file']}#{int(row['number'])}"


def load_dev(encoder: Encoder, path: Path = DEV_PATH,
             items: dict[tuple[str, int], GradingItem] | None = None) -> Corpus:
    """The dev set as a domain corpus: rubrics built as production builds them, 3-way labels."""
    from grading_lab.evaluation import bank_items

    items = bank_items() if items is None else items
    rows = read_rows(path)
    cached = caching_encoder(encoder, "dev")
    keys = sorted(items)
    rubrics = dict(zip([f"{f}#{n}" for f, n in keys],
                       prepare_many([items[k] for k in keys], cached, calibrated=False), strict=True))
    answers = [r["answer"] for r in rows]
    feats, cos, learn = answer_features([rubrics[_key(r)] for r in rows], answers, cached)
    cached.save()
    labels = [r["label"] for r in rows]
    return Corpus("dev", rubrics, [_key(r) for r in rows], answers,
                  np.array([x == "correct" for x in labels], dtype=float),
                  np.array([x != "incorrect" for x in labels], dtype=float), feats, cos, learn,
                  domain=True)


@dataclass
class DevCrossVal:
    """3-way and correct-vs-not macro-F1 on dev answers to questions held out of the fit."""

    folds: int
    macro_f1_3: float
    macro_f1_2: float
    predictions: list[str]


def dev_crossval(encoder: Encoder, path: Path = DEV_PATH, folds: int = 7, seed: int = 13,
                 items: dict[tuple[str, int], GradingItem] | None = None) -> DevCrossVal:
    """Grouped CV by question: fit on the public data and the other folds' dev answers, then grade
    the held-out questions' answers with rubrics calibrated by that fold's model."""
    from grading_lab.evaluation import bank_items

    items = bank_items() if items is None else items
    rows = read_rows(path)
    dev = load_dev(encoder, path, items)
    public = [load_corpus(name, encoder) for name in CORPORA]
    qids = sorted(set(dev.question_ids))
    random.Random(seed).shuffle(qids)
    fold_of = {q: i % folds for i, q in enumerate(qids)}
    fold = np.array([fold_of[q] for q in dev.question_ids])
    cached = caching_encoder(encoder, "dev")
    pred = [""] * len(rows)
    for k in range(folds):
        model = fit_model([*public, dev], [*(np.arange(len(c.answers)) for c in public),
                                           np.where(fold != k)[0]])
        test = np.where(fold == k)[0]
        keys = sorted({(rows[i]["file"], int(rows[i]["number"])) for i in test})
        rubrics = dict(zip(keys, prepare_many([items[q] for q in keys], cached, model=model), strict=True))
        results = grade_many([rubrics[(rows[i]["file"], int(rows[i]["number"]))] for i in test],
                             [rows[i]["answer"] for i in test], cached, graders=Graders(model=model, rules=True))
        for i, res in zip(test, results, strict=True):
            pred[i] = res.verdict
    truth = [r["label"] for r in rows]
    two = lambda xs: ["correct" if x == "correct" else "not" for x in xs]  # noqa: E731
    return DevCrossVal(folds, macro_f1(truth, pred, LABELS),
                       macro_f1(two(truth), two(pred), ["correct", "not"]), pred)


def main() -> None:
    """`python -m grading_lab.devset`: grouped-CV figures on the dev set and on both ASAG corpora."""
    from grading_lab.asag import asag_crossval
    from ingest.embedder import SentenceTransformerEncoder

    encoder = SentenceTransformerEncoder()
    cv = dev_crossval(encoder)
    print(f"dev {cv.folds}-fold CV by question: 3-way macro-F1 {cv.macro_f1_3:.3f}, "
          f"correct-vs-not macro-F1 {cv.macro_f1_2:.3f}")
    dev = load_dev(encoder)
    for name in CORPORA:
        r = asag_crossval(encoder, name, extra=[dev])
        print(f"{name:12s} {r.folds}-fold CV by question (fit on training folds + dev), correct-vs-not "
              f"macro-F1: grader {r.grader_f1:.3f}  cosine {r.cosine_f1:.3f}  "
              f"(cosine, oracle threshold {r.cosine_oracle_f1:.3f})")


if __name__ == "__main__":
    main()
