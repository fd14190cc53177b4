"""Questions from outside the bank, graded with no labelled examples: the foreign head.

The learned decision (decision.py) was fitted on this bank's answers: it knows how this bank's
accepted answers are worded and where its partial answers sit. A question passed inline
(`{question, reference_answers, answer}`, or a registered rubric) from another course has none of
that, and the decision draws the line between correct and the rest where this bank needs it: on
SciEntsBank's training answers it called most right answers partial. The foreign head reads the
decision's probabilities again with the evidence a foreign question does have (the similarity
model's logits, the pair judge's reading, cosine and word coverage of the accepted answer, length)
and gives P(correct) and P(correct or partial).

Courses want different lines: one logistic regression fitted on SciEntsBank, Beetle and this bank's
questions together drew one line for all three and fitted none of them well. So P(correct) comes from
one head per style of question it was fitted on (`Style`: each training set's own logistic
regression), weighed by how near the question's vector is to each style's questions (a softmax over
the cosines with each style's mean question vector, `sharpness` times the cosine); a question unlike
all of them takes the nearest style's line. P(correct or partial) is one regression over the sets whose
labels tell partial from incorrect.

Both are fitted by `python -m grading_lab.foreign_fit` on answers whose judge readings are honest
(the judge never trained on them): SciEntsBank's training split, Beetle questions read by judges
trained without them, and the dev set graded inline; its figures come from
cross-validation grouped by question (and by SciEntsBank module, for questions of another domain).
It applies only to a question outside the bank (a rubric with no bank neighbours) without enough
labelled examples for the example head; a bank question is graded by the decision alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.grading.decision import FEATURES as DECISION_FEATURES
from app.grading.examples import usable
from app.grading.heads import LogisticHead, decision_log_odds, load
from app.grading.rubric import Rubric

FOREIGN_PATH = Path(__file__).with_name("foreign.json")

# Of the decision's inputs, those a foreign question has (no wrong options, no neighbours, no
# labelled examples, no explanation).
FEATURES = (
    "z_correct",
    "z_partial",
    "judge_correct",
    "judge_partial",
    "judge_incorrect",
    "sim",
    "coverage",
    "idea_coverage",
    "sim_question",
    "log_words",
    "on_topic",
)
_COLUMNS = [DECISION_FEATURES.index(f) for f in FEATURES]

INPUTS = ("decision_correct", "decision_partial", *FEATURES)


def applies(rubric: Rubric) -> bool:
    """Whether a question is graded with the foreign head: outside the bank, and without enough
    labelled examples for the example head."""
    return rubric.neighbours is None and not usable(rubric)


def head_input(decision_probs: np.ndarray, decision_x: np.ndarray) -> np.ndarray:
    """The head's input: the decision's probabilities as log-odds, then some of the decision's inputs."""
    return np.concatenate([decision_log_odds(decision_probs), np.asarray(decision_x, dtype=np.float64)[_COLUMNS]])


class CreditHead(LogisticHead):
    """One of the foreign head's two logistic regressions over INPUTS."""

    INPUTS = INPUTS
    FIT_COMMAND = "python -m grading_lab.foreign_fit"


@dataclass(frozen=True)
class Style:
    """One style of question the head was fitted on: its questions' mean vector and its line for P(correct)."""

    name: str  # the training set ("scientsbank", "beetle_heldout", "dev_inline")
    centroid: np.ndarray  # the unit mean of its questions' vectors
    correct: CreditHead

    def to_dict(self) -> dict[str, Any]:
        """As foreign.json stores it."""
        return {"name": self.name, "centroid": [round(float(v), 6) for v in self.centroid],
                "correct": self.correct.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Style:
        """Inverse of to_dict."""
        return cls(str(d["name"]), np.asarray(d["centroid"], dtype=np.float64), CreditHead.from_dict(d["correct"]))


@dataclass(frozen=True)
class ForeignHead:
    """P(correct), P(partial), P(incorrect) of an answer to a foreign question, from the decision's
    probabilities and inputs: P(correct) from each style's head, weighed by the question's nearness to the
    style (`weights`), and P(correct or partial) from one head fitted on the sets whose labels tell partial
    from incorrect."""

    styles: tuple[Style, ...]
    pooled: CreditHead  # P(correct) fitted on every style's answers together: the line of a question unlike them
    credit: CreditHead
    version: str
    sharpness: float
    floor: float  # the cosine with a style's questions below which the pooled line counts more than that style's

    def weights(self, question_vec: np.ndarray) -> np.ndarray:
        """How much each style's line counts for a question, then the pooled line's: a softmax over `sharpness`
        times the cosine of the question's vector with each style's mean question vector, and times `floor` for
        the pooled line. A vector from another encoder than the styles' (another width) takes the pooled line."""
        centroids = np.stack([style.centroid for style in self.styles])
        vec = np.asarray(question_vec, dtype=np.float64)
        if vec.shape != centroids.shape[1:]:
            return np.append(np.zeros(len(self.styles)), 1.0)
        cosines = centroids @ vec
        z = self.sharpness * np.append(cosines, self.floor)
        w = np.exp(z - z.max())
        return np.asarray(w / w.sum())

    def probabilities(self, decision_probs: np.ndarray, decision_x: np.ndarray,
                      question_vec: np.ndarray) -> np.ndarray:
        """P(correct), P(partial), P(incorrect) of one answer to the question whose vector is given."""
        x = head_input(decision_probs, decision_x)
        heads = [*(style.correct for style in self.styles), self.pooled]
        p_c = float(sum(w * head.p(x) for w, head in zip(self.weights(question_vec), heads, strict=True)))
        p_credit = max(p_c, self.credit.p(x))
        return np.array([p_c, p_credit - p_c, 1.0 - p_credit])

    def to_dict(self) -> dict[str, Any]:
        """The weights as foreign.json stores them (the fit adds its recipe and figures)."""
        return {"version": self.version, "features": list(INPUTS), "sharpness": self.sharpness, "floor": self.floor,
                "styles": [style.to_dict() for style in self.styles], "pooled": self.pooled.to_dict(),
                "credit": self.credit.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ForeignHead:
        """Inverse of to_dict; refuses a file fitted on other inputs, or without styles."""
        if tuple(d["features"]) != INPUTS or "styles" not in d:
            raise ValueError(f"foreign.json was fitted on other inputs; run `{CreditHead.FIT_COMMAND}`")
        return cls(tuple(Style.from_dict(style) for style in d["styles"]), CreditHead.from_dict(d["pooled"]),
                   CreditHead.from_dict(d["credit"]), str(d["version"]), float(d["sharpness"]), float(d["floor"]))


def load_foreign(path: Path = FOREIGN_PATH) -> ForeignHead:
    """The committed foreign head."""
    return load(ForeignHead.from_dict, path)
