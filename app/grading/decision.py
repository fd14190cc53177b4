"""One learned decision: the similarity evidence, the cheap checks and the pair judge, weighed together.

The grader's older rule stack (app/grading/judge.py: a similarity model, then hand-set thresholds
and vetoes) read every signal on its own. Here they are the inputs of one multinomial logistic
regression over correct / partial / incorrect, fitted on the labelled dev set by
`python -m grading_lab.decision_fit` (grouped by question for its cross-validated figures) and
committed as decision.json beside this file.

A bank question (one with neighbouring questions) that no head grades is weighed by the bank
decision instead (bank_decision.json, `python -m grading_lab.decision_fit --bank --write`): the same
inputs and the late judge's reading of the same pairs (BANK_FEATURES). Two judges built apart read
an answer better together than either alone (docs/GRADING_LOG.md, "Two judges").
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from app.grading.scoring import FEATURES as SIMILARITY_FEATURES

VERDICTS = ("correct", "partial", "incorrect")
DECISION_PATH = Path(__file__).with_name("decision.json")
BANK_DECISION_PATH = Path(__file__).with_name("bank_decision.json")

FEATURES = (
    "z_correct",  # the similarity model's correct logit, with the question's offset and example evidence
    "z_partial",  # its at-least-partial logit
    "judge_correct",  # log P(correct) of the pair judge, against the accepted answer it likes best
    "judge_partial",  # log P(partial) there
    "judge_incorrect",  # log P(incorrect) there
    "judge_wrong",  # the judge's best P(correct) against a known wrong option (0 without any)
    "negation",  # the checks' flags, 0 or 1
    "roles_swapped",
    "keyword_list",
    "off_topic",
    "misconception",
    "evasive",
    "too_short",
    "one_side",  # a two-sided answer about only one side
    "unsupported",  # no word of an accepted answer, and not close to one
    "other_margin",  # how much nearer another bank question's accepted answer is than this one's
    "other_question",  # the check's flag: that margin is large and the other answer close (0 or 1)
    # The similarity evidence itself, not only the general model's logits: the general model was
    # fitted on other data, the decision weighs its inputs for this bank.
    *SIMILARITY_FEATURES,  # cosine and word coverage of the nearest accepted answer, key ideas, ...
    "sim_example",  # cosine to the nearest labelled example (0 without any)
    "sim_explanation",  # cosine to the question's explanation
    "on_topic",  # share of the answer's words found in the question's vocabulary
)
# The bank decision's inputs: FEATURES, then the late judge's reading of the same pairs.
LATE_FEATURES = (
    "late_correct",  # log P(correct) of the late judge, against the accepted answer the pair judge read
    "late_partial",
    "late_incorrect",
    "late_wrong",  # its P(correct) + P(partial) against the nominated wrong option (0 without one)
)
# Then whether the answer gives the question's authored roles their own words and no side another's
# (app/grading/roles.py: cues_confirmed; 0 or 1): the judges do not read which subject goes with which
# claim, and both read some two-sided questions' right answers as wrong.
# Then how much the answer says beyond the question's own words (app/grading/judge.py: Evidence.beyond_question,
# as min(count, BEYOND_CAP) / BEYOND_CAP): evasions restate the question or say something true of anything, and
# both judges read many of them as partial answers.
# Then how far the two judges agree, class by class: the product of their probabilities (pair judge's
# times late judge's) of correct, partial and incorrect. Logistic weights over each judge's log-probabilities
# add the two readings up; the products give the regression a term for the two readings together.
AGREEMENT_FEATURES = ("both_correct", "both_partial", "both_incorrect")
BANK_FEATURES = (*FEATURES, *LATE_FEATURES, "roles_confirmed", "beyond_question", *AGREEMENT_FEATURES)
BEYOND_CAP = 3
FLAG_FEATURES = FEATURES[6:13]
FLAG_OF = {"negation": "negation_mismatch"}  # the checks' own name, where it differs


@dataclass(frozen=True)
class Decision:
    """Weights of the multinomial logistic regression over `features` (FEATURES, or BANK_FEATURES)."""

    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray  # (len(VERDICTS), len(features))
    bias: np.ndarray  # (len(VERDICTS),)
    version: str
    features: tuple[str, ...] = FEATURES

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """P(correct), P(partial), P(incorrect) of one feature vector (or a matrix of them, by rows)."""
        z = ((x - self.mean) / self.scale) @ self.weights.T + self.bias
        z = z - z.max(axis=-1, keepdims=True)
        e = np.exp(z)
        out: np.ndarray = e / e.sum(axis=-1, keepdims=True)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The JSON stored in decision.json."""
        return {"version": self.version, "features": list(self.features), "verdicts": list(VERDICTS),
                "mean": self.mean.tolist(), "scale": self.scale.tolist(),
                "weights": self.weights.tolist(), "bias": self.bias.tolist()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Decision:
        """Inverse of to_dict; refuses a file fitted on other features."""
        features = tuple(d["features"])
        if features not in (FEATURES, BANK_FEATURES) or tuple(d["verdicts"]) != VERDICTS:
            raise ValueError("the decision was fitted on other features; run `python -m grading_lab.decision_fit`")
        arr = lambda v: np.asarray(v, dtype=np.float64)  # noqa: E731
        decision = cls(arr(d["mean"]), arr(d["scale"]), arr(d["weights"]), arr(d["bias"]), str(d["version"]),
                       features)
        if decision.weights.shape != (len(VERDICTS), len(features)) or decision.mean.shape != (len(features),):
            raise ValueError("the decision's weights do not match its features")
        return decision


@lru_cache(maxsize=4)
def load_decision(path: Path = DECISION_PATH) -> Decision:
    """The committed decision."""
    return Decision.from_dict(json.loads(path.read_text(encoding="utf-8")))


@lru_cache(maxsize=4)
def load_bank_decision(path: Path = BANK_DECISION_PATH) -> Decision:
    """The committed bank decision (over BANK_FEATURES)."""
    decision = load_decision(path)
    if decision.features != BANK_FEATURES:
        raise ValueError(f"{path.name} is not a bank decision (its features lack the late judge's)")
    return decision


def _log_probs(probs: np.ndarray) -> list[float]:
    """A judge's three probabilities as the decisions read them: logs, floored at 1e-6."""
    return [math.log(max(float(p), 1e-6)) for p in probs]


def late_vector(on_ref: np.ndarray, on_wrong: float) -> np.ndarray:
    """LATE_FEATURES of one answer: the late judge's probabilities against the accepted answer, and its
    reading against the nominated wrong option."""
    return np.array([*_log_probs(on_ref), on_wrong], dtype=np.float64)


def feature_vector(z_correct: float, z_partial: float, judge_ref: np.ndarray, judge_wrong: float,
                   flags: set[str], one_side: bool, unsupported: bool, other_margin: float,
                   similarity: np.ndarray, sim_example: float, sim_explanation: float, on_topic: float) -> np.ndarray:
    """The decision's input for one answer (`similarity`: the general model's input features)."""
    logs = _log_probs(judge_ref)
    flag_bits = [1.0 if FLAG_OF.get(name, name) in flags else 0.0 for name in FLAG_FEATURES]
    return np.array([z_correct, z_partial, *logs, judge_wrong, *flag_bits, float(one_side), float(unsupported),
                     max(-0.5, other_margin), 1.0 if "other_question" in flags else 0.0,
                     *(float(v) for v in similarity), sim_example, sim_explanation, on_topic], dtype=np.float64)
