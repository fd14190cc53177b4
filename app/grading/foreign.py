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
one line per style of question it was fitted on (each training set's own logistic regression), weighed
by how near the question's vector is to each style's questions, beside the line fitted on all of them
together for a question near none (`heads.StyledLines`). P(correct or partial) is drawn the same way
from the sets whose labels tell partial from incorrect: where a partial answer ends and a wrong one
begins differs between courses as well.

Both are fitted by `python -m grading_lab.foreign_fit` on answers whose judge readings are honest
(the judge never trained on them): SciEntsBank's training split, Beetle questions read by judges
trained without them, and answers to questions from outside the bank in this field graded inline
(data/train/inline_answers.jsonl); its figures come from
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
from app.grading.heads import LogisticHead, StyledLines, credited, decision_log_odds, load
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
class ForeignHead:
    """P(correct), P(partial), P(incorrect) of an answer to a foreign question, from the decision's
    probabilities and inputs: P(correct) and P(correct or partial) each from one line per style of question
    (`StyledLines`; P(correct or partial) from the styles whose labels tell partial from incorrect)."""

    correct: StyledLines[CreditHead]
    credit: StyledLines[CreditHead]
    version: str

    def probabilities(self, decision_probs: np.ndarray, decision_x: np.ndarray,
                      question_vec: np.ndarray) -> np.ndarray:
        """P(correct), P(partial), P(incorrect) of one answer to the question whose vector is given."""
        x = head_input(decision_probs, decision_x)
        return credited(self.correct.p(x, question_vec), self.credit.p(x, question_vec))

    def to_dict(self) -> dict[str, Any]:
        """The weights as foreign.json stores them (the fit adds its recipe and figures)."""
        return {"version": self.version, "features": list(INPUTS), "correct": self.correct.to_dict(),
                "credit": self.credit.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ForeignHead:
        """Inverse of to_dict; refuses a file fitted on other inputs, or one with a single P(correct) line (up to
        foreign-9) or a single P(correct or partial) line (up to foreign-11)."""
        if tuple(d["features"]) != INPUTS or "styles" not in d["correct"] or "styles" not in d["credit"]:
            raise ValueError(f"foreign.json was fitted on other inputs; run `{CreditHead.FIT_COMMAND}`")
        return cls(StyledLines.from_dict(d["correct"], CreditHead.from_dict),
                   StyledLines.from_dict(d["credit"], CreditHead.from_dict), str(d["version"]))


def load_foreign(path: Path = FOREIGN_PATH) -> ForeignHead:
    """The committed foreign head."""
    return load(ForeignHead.from_dict, path)
