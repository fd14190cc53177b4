"""Signals of an answer against a rubric, and the general logistic model that combines them."""

from __future__ import annotations

import json
import math
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from app.grading.align import WeightedStems, idea_covered, precision, recall
from app.grading.checks import negation_mismatch
from app.grading.rubric import Rubric
from app.grading.text import StemSet

FEATURES = ("sim", "coverage", "idea_coverage", "sim_question", "log_length", "log_words")
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
    on_topic: float  # fraction of the answer's words found in the question's vocabulary
    stems: StemSet  # the answer's content stems (with what matching them against rubric words found)
    # The log-odds that the answer is correct as the labelled examples' words read it (Rubric.example_words);
    # 0 for a question the example head does not weigh (examples.usable).
    example_words: float = 0.0


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
    """The committed general model (fit by `python -m grading_lab.fit`)."""
    return GeneralModel.from_dict(json.loads(path.read_text()))


def feature_vector(sim: float, coverage: float, idea_coverage: float, sim_q: float, n_answer: int,
                   n_ref: int) -> np.ndarray:
    """The general model's input for one answer against one target."""
    log_length = math.log((1 + n_answer) / (1 + n_ref))
    return np.array([sim, coverage, idea_coverage, sim_q, log_length, math.log(1 + n_answer)],
                    dtype=np.float64)


def idea_coverage(rubric: Rubric, best: int, ans_set: AbstractSet[str]) -> float:
    """Fraction of the best reference's key ideas whose new words the answer contains."""
    ideas = rubric.ideas[best] if best < len(rubric.ideas) else []
    if not ideas:
        return 0.0
    return sum(1 for i in ideas if idea_covered(i, ans_set, rubric.item.question)) / len(ideas)


def _side(ans_vec: np.ndarray, ans_set: AbstractSet[str], n_answer: int, vecs: np.ndarray,
          stems: list[WeightedStems], sim_q: float, extra_sim: float = -1.0,
          rubric: Rubric | None = None) -> Side:
    sims = [float(v) for v in vecs @ ans_vec] if len(vecs) else []
    covs = [recall(ans_set, w) for w in stems]
    combined = [s + 0.5 * c for s, c in zip(sims, covs, strict=True)]
    best = _argmax(combined) if combined else 0
    sim = max([*sims, extra_sim]) if sims or extra_sim > -1 else 0.0
    cov = max(covs) if covs else 0.0
    n_ref = len(stems[best].stems) if stems else 1
    ideas = idea_coverage(rubric, best, ans_set) if rubric is not None else cov
    return Side(sims, covs, best, feature_vector(sim, cov, ideas, sim_q, n_answer, n_ref))


def _argmax(values: list[float]) -> int:
    """Index of the first largest value (np.argmax of a short list, without converting it to an array)."""
    return max(range(len(values)), key=values.__getitem__)


def _key_stems(ref: WeightedStems) -> set[str]:
    return {s for s, w in zip(ref.stems, ref.weights, strict=True) if w >= 1.0}


def signals(rubric: Rubric, ans_vec: np.ndarray, answer: str, ans_stems: list[str],
            read_words: bool = True) -> Signals:
    """Compute every signal for an answer whose vector is already known. The labelled examples' word classifier,
    which only the example head reads, reads the answer only where that head weighs it (`examples.usable`) and
    `read_words` is left on (calibration, which reads every example, turns it off)."""
    ans_set = StemSet(ans_stems)
    sim_q = float(rubric.question_vec @ ans_vec)
    sim_e = float(rubric.expl_vec @ ans_vec) if rubric.expl_vec is not None else -1.0
    # Polarity is checked against the reference the answer is closest to: with several references
    # ("not connected" / "separated by a gap") one of them will not share the answer's polarity.
    # The explanation paraphrases the answer but says more, so its similarity counts a little less.
    ref = _side(ans_vec, ans_set, len(ans_stems), rubric.ref_vecs, rubric.ref_stems, sim_q,
                extra_sim=sim_e - 0.05 if sim_e > -1 else -1.0, rubric=rubric)
    refs = list(rubric.item.reference_answers)
    closest = _argmax([s + c for s, c in zip(ref.sims, ref.coverages, strict=True)])
    neg = negation_mismatch(answer, [refs[closest]], [_key_stems(rubric.ref_stems[closest])])
    wrong = None
    if rubric.wrong_stems:
        wrong = _side(ans_vec, ans_set, len(ans_stems), rubric.wrong_vecs, rubric.wrong_stems, sim_q)
    ex_sims = [float(v) for v in rubric.example_vecs @ ans_vec] if len(rubric.example_vecs) else []
    model = None
    if read_words and rubric.item.examples:
        from app.grading.examples import usable  # examples.py imports this module (through heads and decision)

        model = rubric.example_words if usable(rubric) else None
    return Signals(ref, wrong, sim_e, sim_q, ex_sims, neg, precision(ans_stems, rubric.vocabulary), ans_set,
                   model.log_odds(answer) if model is not None else 0.0)
