"""Fit the general grading model on the ASAG training splits and our dev set: `python -m grading_lab.fit`."""

from __future__ import annotations

import json

import numpy as np

from app.grading.scoring import MODEL_PATH
from grading_lab.asag import CORPORA, DOMAIN_WEIGHT, fit_model, load_corpus
from grading_lab.devset import load_dev
from ingest.embedder import Encoder


def fit(encoder: Encoder) -> dict[str, object]:
    """Fit both heads on all ASAG training answers and the dev set; return the JSON to commit."""
    corpora = [*(load_corpus(name, encoder) for name in CORPORA), load_dev(encoder)]
    model = fit_model(corpora)
    out: dict[str, object] = model.to_dict()
    out["fit"] = {
        "encoder": encoder.model_id,
        "data": {c.name: int(c.learn.sum()) for c in corpora},
        "method": "L2 logistic regression (l2=1), standardised features, classes balanced within "
                  f"the public pool and within the dev set, dev total weight x{DOMAIN_WEIGHT} the public "
                  "total; rows the hard checks decide are left out. Partial head: among non-correct "
                  "answers, Beetle partially_correct_incomplete and dev partial vs the rest",
    }
    return out


def main() -> None:
    """Fit and write app/grading/general_model.json."""
    from ingest.embedder import SentenceTransformerEncoder

    result = fit(SentenceTransformerEncoder())
    MODEL_PATH.write_text(json.dumps(result, indent=1) + "\n")
    weights = np.round(np.array(result["correct"]["w"]), 3)  # type: ignore[index]
    print(f"wrote {MODEL_PATH}; correct-head weights {weights.tolist()}")


if __name__ == "__main__":
    main()
