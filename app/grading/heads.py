"""Binary heads over the learned decision: P(correct) from its probabilities and more evidence.

The decision (decision.py) is fitted on this bank's answers. Where a question brings evidence it
does not weigh (labelled examples: examples.py) or comes from outside the bank (foreign.py), a
logistic regression reads the decision's probabilities with that evidence and gives P(correct).
Both heads share the weights' format, the file check and the verdict rule here, and the way P(correct)
is drawn per style of question (`StyledLines`): courses want different lines between right and the rest.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

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


@dataclass(frozen=True)
class Style(Generic[H]):
    """One style of question a head was fitted on: its questions' mean vector and its own line."""

    name: str  # the training set ("scientsbank", "beetle", "dev", ...)
    centroid: np.ndarray  # the unit mean of its questions' vectors
    line: H

    def to_dict(self) -> dict[str, Any]:
        """As the head's file stores it."""
        return {"name": self.name, "centroid": [round(float(v), 6) for v in self.centroid], "line": self.line.to_dict()}


@dataclass(frozen=True)
class StyledLines(Generic[H]):
    """P(correct) from one logistic line per style of question, weighed by how near the question's vector is
    to each style's questions (a softmax of `sharpness` times the cosines), beside the line fitted on every
    style together (`pooled`), which counts as a style at cosine `floor`: a question near a style takes its
    line, a question near none the pooled one, and a vector of another encoder (another width) the pooled one
    alone (docs/GRADING_LOG.md, "One line per style of question (foreign-10)")."""

    styles: tuple[Style[H], ...]
    pooled: H
    sharpness: float
    floor: float

    @cached_property
    def centroids(self) -> np.ndarray:
        """The styles' mean question vectors, one row per style (stacked once, not per answer)."""
        return np.stack([style.centroid for style in self.styles])

    def weights(self, question_vec: np.ndarray) -> np.ndarray:
        """How much each style's line counts for a question, then the pooled line's."""
        if not self.styles:
            return np.ones(1)
        centroids = self.centroids
        vec = np.asarray(question_vec, dtype=np.float64)
        if vec.shape != centroids.shape[1:]:
            return np.append(np.zeros(len(self.styles)), 1.0)
        z = self.sharpness * np.append(centroids @ vec, self.floor)
        w = np.exp(z - z.max())
        return np.asarray(w / w.sum())

    def p(self, x: np.ndarray, question_vec: np.ndarray) -> float:
        """P(correct) of one input vector, for the question whose vector is given."""
        lines = [*(style.line for style in self.styles), self.pooled]
        return float(sum(w * line.p(x) for w, line in zip(self.weights(question_vec), lines, strict=True)))

    def to_dict(self) -> dict[str, Any]:
        """As the head's file stores them."""
        return {"sharpness": self.sharpness, "floor": self.floor, "styles": [s.to_dict() for s in self.styles],
                "pooled": self.pooled.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any], line: Callable[[dict[str, Any]], H]) -> StyledLines[H]:
        """Inverse of to_dict, each line read by `line` (its class's from_dict)."""
        styles = tuple(Style(str(s["name"]), np.asarray(s["centroid"], dtype=np.float64), line(s["line"]))
                       for s in d["styles"])
        return cls(styles, line(d["pooled"]), float(d["sharpness"]), float(d["floor"]))


@lru_cache(maxsize=8)
def load(from_dict: Callable[[dict[str, Any]], T], path: Path) -> T:
    """A committed head's weights, read by its class's `from_dict` (once per process)."""
    return from_dict(json.loads(path.read_text(encoding="utf-8")))


def credited(p_correct: float, p_credit: float) -> np.ndarray:
    """P(correct), P(partial), P(incorrect) from a head's P(correct) and P(correct or partial) (raised to P(correct)
    where its line reads less)."""
    p_credit = max(p_correct, p_credit)
    return np.array([p_correct, p_credit - p_correct, 1.0 - p_credit])


def head_verdict(probs: np.ndarray) -> str:
    """Correct when the head says so (P >= 1/2); otherwise the better of the verdicts that are not."""
    return "correct" if probs[0] >= 0.5 else VERDICTS[1 + int(np.argmax(probs[1:]))]
