"""Signals of an answer against a rubric, and the general logistic model that combines them."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from app.grading.align import WeightedStems, precision, recall
from app.grading.checks import negation_mismatch
from app.grading.rubric import Rubric

FEATURES = ("sim", "coverage", "idea_sim", "sim_question", "support", "log_length", "negation")
MODEL_PATH = Path(__file__).with_name("general_model.json")


@dataclass
class Side:
    """How an answer relates to one set of targets (the accepted answers, or the wrong options)."""

    sims: list[float]
    coverages: list[float]
    best: int
    features: np.ndarray


@dataclass
class Signals:
    """All per-answer evidence the grader combines."""

    ref: Side
    wrong: Side | None
    sim_explanation: float
    sim_question: float
    example_sims: list[float]
    negation: bool


@dataclass(frozen=True)
class GeneralModel:
    """Two logistic heads over FEATURES: correct-vs-not and at-least-partial-vs-not."""

    mean: np.ndarray
    scale: np.ndarray
    w_correct: np.ndarray
    b_correct: float
    w_partial: np.ndarray
    b_partial: float

    def logits(self, x: np.ndarray) -> tuple[float, float]:
        """(correct logit, at-least-partial logit) for one feature vector."""
        z = (x - self.mean) / self.scale
        return float(z @ self.w_correct + self.b_correct), float(z @ self.w_partial + self.b_partial)

    def to_dict(self) -> dict[str, Any]:
        """JSON shape stored in general_model.json."""
        return {
            "features": list(FEATURES),
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "correct": {"w": self.w_correct.tolist(), "b": self.b_correct},
            "partial": {"w": self.w_partial.tolist(), "b": self.b_partial},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GeneralModel:
        """Inverse of to_dict; refuses a file fit on other features."""
        if tuple(d["features"]) != FEATURES:
            raise ValueError(f"general model features {d['features']} != {FEATURES}; refit it")
        arr = lambda v: np.asarray(v, dtype=np.float64)  # noqa: E731
        return cls(arr(d["mean"]), arr(d["scale"]), arr(d["correct"]["w"]), float(d["correct"]["b"]),
                   arr(d["partial"]["w"]), float(d["partial"]["b"]))


@lru_cache(maxsize=4)
def load_model(path: Path = MODEL_PATH) -> GeneralModel:
    """The committed general model (fit by `python -m app.grading.fit`)."""
    return GeneralModel.from_dict(json.loads(path.read_text()))


def feature_vector(sim: float, coverage: float, idea_sim: float, sim_q: float, on_topic: float,
                   n_answer: int, n_ref: int, negation: bool) -> np.ndarray:
    """The general model's input for one answer against one target."""
    log_length = math.log((1 + n_answer) / (1 + n_ref))
    return np.array([sim, coverage, idea_sim, sim_q, on_topic, log_length, float(negation)],
                    dtype=np.float64)


def idea_similarity(rubric: Rubric, units: np.ndarray) -> float:
    """Phrase-level alignment: per reference, the mean over its key ideas of the best-matching
    answer phrase's cosine; the best reference wins."""
    if not len(rubric.idea_vecs):
        return 0.0
    best_per_idea = (rubric.idea_vecs @ units.T).max(axis=1)
    out, at = 0.0, 0
    for ideas in rubric.ideas:
        if ideas:
            out = max(out, float(best_per_idea[at : at + len(ideas)].mean()))
        at += len(ideas)
    return out


def _side(ans_vec: np.ndarray, ans_set: set[str], n_answer: int, vecs: np.ndarray,
          stems: list[WeightedStems], sim_q: float, on_topic: float, negation: bool,
          extra_sim: float = -1.0, idea_sim: float | None = None) -> Side:
    sims = [float(v) for v in vecs @ ans_vec] if len(vecs) else []
    covs = [recall(ans_set, w) for w in stems]
    combined = [s + 0.5 * c for s, c in zip(sims, covs, strict=True)]
    best = int(np.argmax(combined)) if combined else 0
    sim = max([*sims, extra_sim]) if sims or extra_sim > -1 else 0.0
    cov = max(covs) if covs else 0.0
    n_ref = len(stems[best].stems) if stems else 1
    ideas = sim if idea_sim is None else idea_sim
    return Side(sims, covs, best,
                feature_vector(sim, cov, ideas, sim_q, on_topic, n_answer, n_ref, negation))


def _key_stems(ref: WeightedStems) -> set[str]:
    return {s for s, w in zip(ref.stems, ref.weights, strict=True) if w >= 1.0}


def signals(rubric: Rubric, ans_vec: np.ndarray, answer: str, ans_stems: list[str],
            segment_vecs: np.ndarray | None = None) -> Signals:
    """Compute every signal for an answer whose vector (and phrase vectors) are already known."""
    ans_set = set(ans_stems)
    sim_q = float(rubric.question_vec @ ans_vec)
    sim_e = float(rubric.expl_vec @ ans_vec) if rubric.expl_vec is not None else -1.0
    on_topic = precision(ans_stems, rubric.vocabulary)
    # Polarity is checked against the reference the answer is closest to: with several references
    # ("not connected" / "separated by a gap") one of them will not share the answer's polarity.
    refs = list(rubric.item.reference_answers)
    closest = int(np.argmax([float(rubric.ref_vecs[i] @ ans_vec) + recall(ans_set, w)
                             for i, w in enumerate(rubric.ref_stems)]))
    neg = negation_mismatch(answer, [refs[closest]], [_key_stems(rubric.ref_stems[closest])])
    # The explanation paraphrases the answer but says more, so its similarity counts a little less.
    units = ans_vec[None, :] if segment_vecs is None or not len(segment_vecs) else np.vstack(
        [ans_vec[None, :], segment_vecs])
    ref = _side(ans_vec, ans_set, len(ans_stems), rubric.ref_vecs, rubric.ref_stems, sim_q,
                on_topic, neg, extra_sim=sim_e - 0.05 if sim_e > -1 else -1.0,
                idea_sim=idea_similarity(rubric, units))
    wrong = None
    if rubric.wrong_stems:
        wrong_neg = negation_mismatch(answer, list(rubric.item.wrong_answers),
                                      [_key_stems(w) for w in rubric.wrong_stems])
        wrong = _side(ans_vec, ans_set, len(ans_stems), rubric.wrong_vecs, rubric.wrong_stems, sim_q,
                      on_topic, wrong_neg)
    ex_sims = [float(v) for v in rubric.example_vecs @ ans_vec] if len(rubric.example_vecs) else []
    return Signals(ref, wrong, sim_e, sim_q, ex_sims, neg)
