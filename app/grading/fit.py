"""Fit the general grading model on the ASAG training splits: `python -m app.grading.fit`."""

from __future__ import annotations

import json

import numpy as np

from app.grading.asag import CORPORA, fit_model, load_corpus
from app.grading.scoring import MODEL_PATH
from ingest.embedder import Encoder


def fit(encoder: Encoder) -> dict[str, object]:
    """Fit both heads on all ASAG training answers and return the JSON to commit."""
    corpora = [load_corpus(name, encoder) for name in CORPORA]
    model = fit_model(corpora)
    out: dict[str, object] = model.to_dict()
    out["fit"] = {
        "encoder": encoder.model_id,
        "data": {c.name: len(c.answers) for c in corpora},
        "method": "L2 logistic regression (l2=1, balanced), standardised features; "
                  "partial head on Beetle 5-way non-correct answers: partially_correct_incomplete vs the rest",
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
