"""What a question's labelled examples say about a new answer: the example head.

A caller that grades many answers to one question (the public "unseen answers" splits, a course
that has already marked last year's answers) can pass labelled answers as `examples`. The learned
decision reads only the nearest one (`sim_example`). The example head weighs the decision's
verdict with how near the answer is to the correct examples and to the others, how the nearest
few were labelled, how far closeness predicts the examples' own labels (`example_lift`: it
does for a class's past answers, not for contrasts such as a negation beside the right answer it
negates), and what a classifier fitted on the examples' words reads in the answer (lexical.py).

Beside P(correct), one more line gives P(correct or partial) (fitted on the inline answers, whose examples carry
partial labels); an answer not called correct is partial or incorrect by these two, as the foreign head reads its
own.

Courses weigh that evidence differently (SciEntsBank's labels follow the nearest examples more than
the decision; this field's contrasts the other way round), so P(correct) comes from one logistic
regression over `head_input` for SciEntsBank and one for answers to questions of this field outside the
bank (data/train/inline_answers.jsonl), weighed by how near the question is to each set's questions,
beside one fitted on every set together (`heads.StyledLines`, as the foreign head draws it; Beetle's
answers weigh in that one only: grading_lab/examples_fit.py, OWN_LINES). The lines are fitted by `python
-m grading_lab.examples_fit` on SciEntsBank's training split, Beetle's training split (each question read
by a judge that never trained on it: grading_lab/heldout.py) and those inline answers, each graded as the
unseen-answers splits are (grading_lab/examples_cv.py), with figures from
cross-validation grouped by question, and committed as examples.json beside this file. The head
applies only to a question with at least MIN_EXAMPLES labelled examples of which some are correct
and some are not.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from app.grading.heads import LogisticHead, StyledLines, credited, decision_log_odds, load, log_odds
from app.grading.rubric import Rubric

EXAMPLES_PATH = Path(__file__).with_name("examples.json")
MIN_EXAMPLES = 8
NEAREST = 7  # how many of the nearest examples vote
TEMPERATURE = 0.05  # cosine scale of the vote's weights: an example 0.05 farther weighs 1/e as much

FEATURES = (
    "max_correct",  # cosine to the nearest example labelled correct
    "max_other",  # cosine to the nearest example labelled partial or incorrect
    "margin",  # max_correct - max_other
    "vote",  # similarity-weighted share of correct among the NEAREST nearest examples, as a log-odds
    "prior",  # share of correct among all examples, as a log-odds
    "lift",  # how well the examples' own neighbours predict their labels (`example_lift`)
    "lift_vote",  # lift x vote: a vote counts for more where closeness has predicted the labels
    "words_correct",  # the largest word overlap (Jaccard of content stems) with an example labelled correct
    "words_other",  # and with an example labelled partial or incorrect
    "words_margin",  # words_correct - words_other
    "covers_correct",  # the largest share of an example labelled correct's content stems that the answer holds
    "covers_other",  # and of an example labelled partial or incorrect
    "covers_margin",  # covers_correct - covers_other
    "words",  # the log-odds that the answer is correct as a classifier of the examples' words reads it (lexical.py)
)

INPUTS = (
    "decision_correct",  # the learned decision's P(correct), as a log-odds
    "decision_partial",  # its P(correct) + P(partial), as a log-odds
    *FEATURES,
    "lift_decision",  # lift x decision_correct
)


def _vote(sims: np.ndarray, good: np.ndarray) -> float:
    """The similarity-weighted share of correct among the NEAREST nearest examples."""
    top = np.argsort(-sims)[:NEAREST]
    w = np.exp((sims[top] - sims[top[0]]) / TEMPERATURE)
    return float((w * good[top]).sum() / w.sum())


def _labels(rubric: Rubric) -> np.ndarray:
    return np.array([label == "correct" for _, label in rubric.item.examples], dtype=bool)


def example_lift(rubric: Rubric) -> float:
    """How much better the examples' own neighbours predict their labels than the majority label does:
    each example's vote among the others (leave one out), its accuracy less the majority's share.
    Near 0 when labels do not follow closeness, as when the examples are contrasts (a negation beside
    the right answer it negates)."""
    good = _labels(rubric)
    n = len(good)
    if n < 2 or len(rubric.example_vecs) != n:
        return 0.0
    sims = np.asarray(rubric.example_vecs @ rubric.example_vecs.T, dtype=np.float64)
    np.fill_diagonal(sims, -np.inf)  # an example does not vote for itself (its weight below is 0)
    top = np.argsort(-sims, axis=1)[:, :NEAREST]
    near = np.take_along_axis(sims, top, axis=1)
    w = np.exp((near - near[:, :1]) / TEMPERATURE)
    votes = (w * good[top]).sum(axis=1) / w.sum(axis=1)
    share = float(good.mean())
    return float(np.mean((votes >= 0.5) == good)) - max(share, 1 - share)


def usable(rubric: Rubric) -> bool:
    """Whether the question has enough labelled examples, of both kinds, for the head."""
    good = _labels(rubric)
    return bool(len(good) >= MIN_EXAMPLES and 0 < good.sum() < len(good))


def _overlap(answer: AbstractSet[str], example: frozenset[str]) -> tuple[float, float]:
    """Jaccard of two sets of content stems, and the share of the example's that the answer holds (0 when
    empty)."""
    shared, union = len(answer & example), len(answer | example)
    return (shared / union if union else 0.0), (shared / len(example) if example else 0.0)


def _best(values: np.ndarray, among: np.ndarray) -> float:
    return float(values[among].max()) if among.any() else 0.0


def example_features(rubric: Rubric, example_sims: list[float] | np.ndarray,
                     answer_stems: AbstractSet[str], words: float = 0.0) -> np.ndarray:
    """The head's input for an answer, from its cosines to the question's labelled examples
    (`Signals.example_sims`), its content stems against theirs and the examples' word classifier's reading of
    it (`Signals.example_words`) (zeros for a question without examples).

    The word overlap (Jaccard, and how much of an example the answer holds) adds what the cosines miss
    among the short answers of one question, where key words decide the label (grouped CV in
    grading_lab/examples_fit.py: docs/GRADING_LOG.md, "Word overlap with the labelled examples"); the
    classifier, which words tell the examples' classes apart ("The examples' words, per question
    (examples-13)")."""
    if not rubric.item.examples or len(example_sims) == 0:
        return np.zeros(len(FEATURES))
    sims = np.asarray(example_sims, dtype=np.float64)
    good = _labels(rubric)
    max_c, max_o = _best(sims, good), _best(sims, ~good)
    vote = log_odds(_vote(sims, good))
    lift = rubric.example_lift
    stems = frozenset(answer_stems)
    overlaps = np.array([_overlap(stems, ex) for ex in rubric.example_stems]).reshape(-1, 2)
    words_c, words_o = _best(overlaps[:, 0], good), _best(overlaps[:, 0], ~good)
    covers_c, covers_o = _best(overlaps[:, 1], good), _best(overlaps[:, 1], ~good)
    return np.array([max_c, max_o, max_c - max_o, vote, log_odds(float(good.mean())), lift, lift * vote,
                     words_c, words_o, words_c - words_o, covers_c, covers_o, covers_c - covers_o, words])


def head_input(decision_probs: np.ndarray, feats: np.ndarray) -> np.ndarray:
    """The head's input vector: the decision's probabilities as log-odds, then the example features."""
    logs = decision_log_odds(decision_probs)
    lift = float(feats[FEATURES.index("lift")])
    return np.concatenate([logs, feats, [lift * logs[0]]])


class ExampleLine(LogisticHead):
    """One of the example head's logistic regressions over INPUTS."""

    INPUTS = INPUTS
    FIT_COMMAND = "python -m grading_lab.examples_fit"


@dataclass(frozen=True)
class ExampleHead:
    """P(correct) and P(correct or partial) from the decision's probabilities and the example features, each by
    one line per style of question (`StyledLines`)."""

    correct: StyledLines[ExampleLine]
    credit: StyledLines[ExampleLine]
    version: str

    def probabilities(self, decision_probs: np.ndarray, feats: np.ndarray, question_vec: np.ndarray) -> np.ndarray:
        """P(correct), P(partial), P(incorrect) of one answer to the question whose vector is given, from the
        decision's P(correct, partial, incorrect) and the answer's example features."""
        x = head_input(decision_probs, feats)
        return credited(self.correct.p(x, question_vec), self.credit.p(x, question_vec))

    def to_dict(self) -> dict[str, Any]:
        """The weights as examples.json stores them (the fit adds its recipe and figures)."""
        return {"version": self.version, "features": list(INPUTS), "correct": self.correct.to_dict(),
                "credit": self.credit.to_dict()}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExampleHead:
        """Inverse of to_dict; refuses a file fitted on other inputs, one with a single line (up to examples-9) or
        one without P(correct or partial) (up to examples-13)."""
        if tuple(d["features"]) != INPUTS or any("styles" not in d.get(k, {}) for k in ("correct", "credit")):
            raise ValueError(f"examples.json was fitted on other inputs; run `{ExampleLine.FIT_COMMAND}`")
        return cls(StyledLines.from_dict(d["correct"], ExampleLine.from_dict),
                   StyledLines.from_dict(d["credit"], ExampleLine.from_dict), str(d["version"]))


def load_head(path: Path = EXAMPLES_PATH) -> ExampleHead:
    """The committed example head."""
    return load(ExampleHead.from_dict, path)
