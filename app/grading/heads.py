"""Binary heads over the learned decision: P(correct) from its probabilities and more evidence.

The decision (decision.py) is fitted on this bank's answers. Where a question brings evidence it
does not weigh (labelled examples: examples.py) or comes from outside the bank (foreign.py), a
logistic regression reads the decision's probabilities with that evidence and gives P(correct).
Both heads share the weights' format, the file check and the verdict rule here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np

from app.grading.decision import VERDICTS

H = TypeVar("H", bound="LogisticHead")
T = TypeVar("T")


def log_odds(p: float) -> float:
    """log(p / (1 - p)), with p clipped to [0.02, 0.98] so that a sure input cannot dominate."""
    p = min(max(p, 0.02), 0.98)
    return math.log(p / (1 - p))


def decision_log_odds(decision_probs: np.ndarray) -> list[float]:
    """The decision's P(correct) and P(correct) + P(partial), as log-odds: every head's first inputs."""
    p_c, p_p = float(decision_probs[0]), float(decision_probs[1])
    return [log_odds(p_c), log_odds(p_c + p_p)]


@dataclass(frozen=True)
class LogisticHead:
    """A logistic regression over a subclass's INPUTS, standardised by the fit's mean and scale."""

    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray  # over INPUTS
    bias: float
    version: str

    INPUTS: ClassVar[tuple[str, ...]] = ()
    FIT_COMMAND: ClassVar[str] = ""  # what rebuilds the weights file, for the error that asks for it

    def p(self, x: np.ndarray) -> float:
        """P(correct) of one input vector."""
        z = float(((x - self.mean) / self.scale) @ self.weights + self.bias)
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def to_dict(self) -> dict[str, Any]:
        """The weights as their JSON file stores them (the fit adds its recipe and figures)."""
        return {
            "version": self.version,
            "features": list(self.INPUTS),
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "weights": self.weights.tolist(),
            "bias": self.bias,
        }

    @classmethod
    def from_dict(cls: type[H], d: dict[str, Any]) -> H:
        """Inverse of to_dict; refuses a file fitted on other inputs."""
        if tuple(d["features"]) != cls.INPUTS:
            raise ValueError(f"{cls.__name__}'s weights were fitted on other inputs; run `{cls.FIT_COMMAND}`")
        arr = lambda v: np.asarray(v, dtype=np.float64)  # noqa: E731
        return cls(arr(d["mean"]), arr(d["scale"]), arr(d["weights"]), float(d["bias"]), str(d["version"]))


@lru_cache(maxsize=8)
def load(from_dict: Callable[[dict[str, Any]], T], path: Path) -> T:
    """A committed head's weights, read by its class's `from_dict` (once per process)."""
    return from_dict(json.loads(path.read_text(encoding="utf-8")))


def with_p_correct(decision_probs: np.ndarray, p_c: float) -> np.ndarray:
    """The decision's probabilities with P(correct) replaced by a head's; P(partial) and P(incorrect)
    share the rest as the decision shares them."""
    rest = float(decision_probs[1] + decision_probs[2])
    share = float(decision_probs[1]) / rest if rest > 0 else 0.5
    return np.array([p_c, (1 - p_c) * share, (1 - p_c) * (1 - share)])


def head_verdict(probs: np.ndarray) -> str:
    """Correct when the head says so (P >= 1/2); otherwise the better of the verdicts that are not."""
    return "correct" if probs[0] >= 0.5 else VERDICTS[1 + int(np.argmax(probs[1:]))]
