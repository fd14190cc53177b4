"""Fit the example head on the SemEval-2013 training splits: `python -m grading_lab.examples_fit`.

Three sets are graded as the public "unseen answers" splits are graded from outside
(grading_lab/examples_cv.py: a question's other answers, with their labels, passed as labelled
examples): SciEntsBank's training split, Beetle's training answers, the questions of each of the five ASAG
folds read by a judge trained without them (grading_lab/heldout.py: the shipped judge trained on
every Beetle answer, and a head fitted on its readings of them leans on the decision more than a new
answer warrants), and the answers to 60 questions outside the bank in this product's field
(data/train/inline_answers.jsonl), each question passed inline. The head (app/grading/examples.py) learns
P(correct) from the decision's probabilities and the example features: one line each for the sets of
OWN_LINES and one over the three, each set weighing the same there (the inline answers' contrasts, a
negation beside the right answer it negates, are where closeness misleads).

Its figures come from cross-validation grouped by question over the sets pooled (no question's answers
are in both the fit and the figure), from the other sets' fit, and from the same folds' heads grading
the answers again with a teacher's count of examples (8 to 16 drawn from the others: `TEACHER`). The dev set
(bank questions, with their neighbours) is graded by the head fitted on the three sets but not fitted on: the
decision was fitted on its answers, and a line fitted over the decision's readings of them learnt to trust the
decision more than a new question warrants (docs/GRADING_LOG.md, "Questions from outside the bank in this
field (foreign-12)").
"""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.grading.decision import VERDICTS
from app.grading.examples import (
    EXAMPLES_PATH,
    INPUTS,
    MIN_EXAMPLES,
    NEAREST,
    TEMPERATURE,
    ExampleHead,
    ExampleLine,
)
from app.grading.heads import H, Style, StyledLines, T
from app.grading.judges import Judge
from grading_lab.asag import ASAG_DIR, CORPORA
from grading_lab.examples_cv import (
    DEV_PATH,
    EXAMPLE_FOLDS,
    INLINE_PATH,
    SEED,
    TEACHER,
    Simulated,
    simulate,
    simulate_dev,
    simulate_inline,
)
from grading_lab.heldout import HOLDOUTS, NAME, beetle_heldout, heldout_judges, train_holdout
from grading_lab.logreg import fit_logistic, macro_f1, standardiser
from ingest.embedder import Encoder
from ingest.identity import file_sha256

HEAD_VERSION = "examples-14"
SET_OF = {"scientsbank": "scientsbank", "beetle": NAME}  # the set of the fit that holds each ASAG split's answers
L2 = 1.0
FOLDS = 5  # folds of questions for the head's own cross-validation


# The sets that keep a line of their own; the others weigh in the pooled line only. Beetle's own line, fitted
# where each question brings about 80 noisy labelled answers, weighs the decision over a teacher's clean dozen
# (tests/app/grading/test_examples_head.py's circuit question: `partial`, 0.60), and Beetle's questions then take
# SciEntsBank's line. Grouped CV over fold seeds 13, 1, 2 and 3 (`python -m grading_lab.examples_fit`; SciEntsBank
# / Beetle / the first 20 inline questions' answers): 0.790 / 0.795 / 0.909; with the dev set in their place,
# 0.790 / 0.799, those answers 0.758 not fitted (docs/GRADING_LOG.md, "Questions from outside the bank in this field
# (foreign-12)"; "The example head per style, over honest Beetle readings (examples-10)" for Beetle's line).
OWN_LINES = frozenset({"scientsbank", "inline_answers"})


# The sets whose examples carry partial labels, on which P(correct or partial) is fitted (one line over them): the
# inline answers, labelled 3-way. Beetle's examples are passed with their 2-way labels, as the public splits pass
# them. Grouped CV over fold seeds 13, 1, 2 and 3 (the 60 inline questions of authors A to H, 3-way macro-F1): partial
# against incorrect as the decision reads them 0.680, as this line reads them 0.782 (docs/GRADING_LOG.md, "Partial
# credit with labelled examples (examples-14)").
CREDIT_FROM = frozenset({"inline_answers"})


def fit_head(sims: list[Simulated], keep: list[set[str]] | None = None) -> ExampleHead:
    """The head fitted on the answers it weighs, of the questions in `keep` (per set; all if None): P(correct) with
    one line for each set of OWN_LINES and one over every set (`fit_styled`); P(correct or partial) with one line
    over the sets of CREDIT_FROM (where none is present, one line for P(correct) over every set)."""
    weighed = [s.head_rows() for s in sims]
    correct = fit_styled(ExampleLine, HEAD_VERSION, weighed, sims, keep, OWN_LINES)
    chosen = [n for n, s in enumerate(sims) if s.corpus in CREDIT_FROM]
    if chosen:
        credit = fit_credit(ExampleLine, HEAD_VERSION, weighed, sims, keep, chosen, own=frozenset())
    else:
        credit = fit_styled(ExampleLine, HEAD_VERSION, weighed, sims, keep, own=frozenset())
    return ExampleHead(correct, credit, HEAD_VERSION)


def fit_credit(cls: type[H], version: str, weighed: list[tuple[np.ndarray, np.ndarray]], sims: list[Simulated],
               keep: list[set[str]] | None, chosen: list[int], own: AbstractSet[str] | None = None,
               pooled: AbstractSet[str] | None = None) -> StyledLines[H]:
    """P(correct or partial) drawn per style (`fit_styled`, with `own` and `pooled`) over the sets `chosen` (their
    indices in `sims`, `weighed` and `keep`), an answer's target being a label other than incorrect."""
    return fit_styled(cls, version, [weighed[n] for n in chosen], [sims[n] for n in chosen],
                      None if keep is None else [keep[n] for n in chosen], own,
                      targets=[np.array([label != "incorrect" for label in sims[n].labels], dtype=float)
                               for n in chosen], pooled=pooled)


def decision_of(sims: list[Simulated]) -> str:
    """The version of the decision every set was graded with, which a head fitted on them reads again."""
    versions = {s.decision.version for s in sims}
    if len(versions) != 1:
        raise ValueError(f"the sets were graded with different decisions: {sorted(versions)}")
    return versions.pop()


def fit_logistic_head(cls: type[H], version: str, weighed: list[tuple[np.ndarray, np.ndarray]],
                      sims: list[Simulated], keep: list[set[str]] | None = None, l2: float = L2,
                      targets: list[np.ndarray] | None = None) -> H:
    """A head of class `cls` fitted on P(correct) (or P(target), per set: 1 or 0 for each of its answers) of
    the answers each set's head weighs (`weighed`: per set, their indices and inputs), of the questions in
    `keep` (per set; all if None). Each set weighs the same in all, and within a set both classes weigh the
    same."""
    xs, ys, ws = [], [], []
    for n, (sim, (rows, x)) in enumerate(zip(sims, weighed, strict=True)):
        if keep is not None:
            mask = np.array([sim.groups[i] in keep[n] for i in rows], dtype=bool)
            rows, x = rows[mask], x[mask]
        y = (sim.correct if targets is None else targets[n])[rows]
        xs.append(x)
        ys.append(y)
        ws.append(_balanced(y) / max(1, len(rows)))
    x, y, weight = np.vstack(xs), np.concatenate(ys), np.concatenate(ws)
    mean, scale = standardiser(x)
    w, b = fit_logistic((x - mean) / scale, y, l2=l2, sample_weight=weight * len(y) / len(sims))
    return cls(mean, scale, w, float(b), version)


def _balanced(y: np.ndarray) -> np.ndarray:
    """Weights that give both classes the same total (1 in all)."""
    pos, neg = max(1.0, float(y.sum())), max(1.0, float(len(y) - y.sum()))
    return np.where(y > 0.5, 0.5 / pos, 0.5 / neg) * len(y)


# How sharply a question's nearness to each style's questions picks that style's line (the softmax of this times
# the cosines), and the cosine at which the line fitted on every style together counts as much as a style's own
# (heads.StyledLines), for both heads. The foreign head's grouped CV (`python -m grading_lab.foreign_fit`,
# seed 13; SciEntsBank / Beetle's held-out questions / the dev set inline): sharpness 5 reads 0.630 / 0.738 /
# 0.956, 10 0.656 / 0.726 / 0.956, 20 0.667 / 0.720 / 0.954, 50 0.664 / 0.717 / 0.954; the floor from 0.15 to
# 0.3 moves these by at most 0.01 and lifts the dev set graded by the head fitted on the other two sets from
# 0.869 (no floor) to 0.895-0.913 (docs/GRADING_LOG.md, "One line per style of question (foreign-10)").
STYLE_SHARPNESS = 20.0
STYLE_FLOOR = 0.2


def question_vectors(sim: Simulated, keep: set[str] | None = None) -> np.ndarray:
    """The vectors of a set's questions (of those in `keep`, if given) whose answers reached the encoder, one
    row per question (at least one)."""
    vecs: dict[str, np.ndarray] = {}
    for i, (rubric, _, _) in sorted(sim.cases.items()):
        if keep is None or sim.groups[i] in keep:
            vecs.setdefault(sim.groups[i], rubric.question_vec)
    return np.stack(list(vecs.values()))


def fit_styled(cls: type[H], version: str, weighed: list[tuple[np.ndarray, np.ndarray]], sims: list[Simulated],
               keep: list[set[str]] | None = None, own: AbstractSet[str] | None = None,
               targets: list[np.ndarray] | None = None, pooled: AbstractSet[str] | None = None) -> StyledLines[H]:
    """P(correct) (or P(target), as `fit_logistic_head` takes them) drawn per style (heads.StyledLines): each
    set's own line with the unit mean of its questions' vectors, and the line of every set together (of the sets
    named in `pooled`, when given and any is present), each fitted as `fit_logistic_head` fits (on the questions
    in `keep`, per set; all if None). A set none of whose questions the fit keeps (a fold that holds out all of
    them) has no style in it, nor a set not named in `own` (when given): its answers weigh in the pooled line
    only."""
    styles = []
    for n, sim in enumerate(sims):
        kept = None if keep is None else keep[n]
        if own is not None and sim.corpus not in own:
            continue
        if kept is not None and not any(sim.groups[i] in kept for i in sim.cases):
            continue
        mean = question_vectors(sim, kept).mean(axis=0)
        line = fit_logistic_head(cls, version, [weighed[n]], [sim], None if kept is None else [kept],
                                 targets=None if targets is None else [targets[n]])
        styles.append(Style(sim.corpus, mean / np.linalg.norm(mean), line))
    pool = [n for n, sim in enumerate(sims) if pooled is not None and sim.corpus in pooled] or list(range(len(sims)))
    line = fit_logistic_head(cls, version, [weighed[n] for n in pool], [sims[n] for n in pool],
                             None if keep is None else [keep[n] for n in pool],
                             targets=None if targets is None else [targets[n] for n in pool])
    return StyledLines(tuple(styles), line, STYLE_SHARPNESS, STYLE_FLOOR)


def f1_2way(sim: Simulated, verdicts: list[str], rows: list[int] | None = None) -> float:
    """Correct-vs-not macro-F1 of verdicts (of `rows`, or every answer)."""
    idx = range(len(sim.groups)) if rows is None else rows
    truth = ["c" if sim.correct[i] else "i" for i in idx]
    return macro_f1(truth, ["c" if v == "correct" else "i" for v in verdicts], ["c", "i"])


@dataclass
class HeadFigures:
    """Correct-vs-not macro-F1 per set: the served decision alone, and with the head in grouped CV."""

    without_head: dict[str, float]
    grouped_cv: dict[str, float]
    grouped_cv_3way: dict[str, float]  # 3-way macro-F1, for a set with 3-way labels
    cross_split: dict[str, float]  # each set graded by the head fitted on the others
    rows: dict[str, int]  # answers the head weighs, per set
    confusion: dict[str, dict[str, int]]  # per set, "label->verdict" counts of the grouped-CV verdicts
    teacher: dict[str, float] = field(default_factory=dict)  # grouped CV, a teacher's count of examples
    # Sets outside the fit, graded by the head fitted on every set: 2-way, 3-way ("_3way") and without the head
    unfitted: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The figures, rounded, as the manifest records them."""
        r = lambda d: {k: round(v, 4) for k, v in d.items()}  # noqa: E731
        return {"without_head": r(self.without_head), "grouped_cv": r(self.grouped_cv),
                "grouped_cv_3way": r(self.grouped_cv_3way), "grouped_cv_teacher": r(self.teacher),
                "cross_split": r(self.cross_split), "unfitted": r(self.unfitted), "rows": self.rows,
                "confusion": self.confusion}


def _confusion(sim: Simulated, verdicts: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for y, v in zip(sim.correct, verdicts, strict=True):
        key = f"{'correct' if y else 'incorrect'}->{v}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


Grouping = Callable[[str, str], str]  # (set, question) -> the group a fold holds out whole


def by_question(corpus: str, question: str) -> str:
    return question


def grouped_verdicts(sims: list[Simulated], fit: Callable[[list[Simulated], list[set[str]]], T],
                     verdicts: Callable[[Simulated, T, list[int]], list[str]], group: Grouping = by_question,
                     folds: int = FOLDS, seed: int = SEED, graded: list[Simulated] | None = None) -> list[list[str]]:
    """Every answer's verdict (per set) from a head fitted without its group's answers: folds of groups,
    all sets pooled. `fit` fits a head on the questions kept per set; `verdicts` grades a set's rows with it.
    `graded`: sets of the same questions to grade instead (the same answers with other examples), set for set."""
    keys = sorted({(n, group(s.corpus, g)) for n, s in enumerate(sims) for g in s.groups})
    random.Random(seed).shuffle(keys)
    fold_of = {k: i % folds for i, k in enumerate(keys)}
    graded = sims if graded is None else graded
    predicted = [[""] * len(s.groups) for s in graded]
    for k in range(folds):
        head = fit(sims, [{g for g in s.groups if fold_of[(n, group(s.corpus, g))] != k} for n, s in enumerate(sims)])
        for n, s in enumerate(graded):
            rows = [i for i, g in enumerate(s.groups) if fold_of[(n, group(s.corpus, g))] == k]
            for i, v in zip(rows, verdicts(s, head, rows), strict=True):
                predicted[n][i] = v
    return predicted


def grouped_cv(sims: list[Simulated], folds: int = FOLDS, seed: int = SEED,
               teacher: list[Simulated] | None = None, unfitted: list[Simulated] | None = None,
               head: ExampleHead | None = None) -> HeadFigures:
    """The head's figures: folds of questions over the sets pooled, and each set by the others' fit; `teacher`:
    the same sets' answers given a teacher's count of examples, graded by the same folds' heads; `unfitted`:
    sets outside the fit, graded by the head fitted on every set (`head`, when the caller has it)."""
    grade = lambda s, head, rows: s.verdicts(head, rows)  # noqa: E731
    predicted = grouped_verdicts(sims, fit_head, grade, folds=folds, seed=seed)
    cross = {}
    for n, sim in enumerate(sims):
        others = [s for m, s in enumerate(sims) if m != n]
        if others:
            cross[sim.corpus] = f1_2way(sim, sim.verdicts(fit_head(others)))
    three = {}
    for n, sim in enumerate(sims):
        if "partial" in sim.labels:
            three[sim.corpus] = macro_f1(sim.labels, predicted[n], list(VERDICTS))
            three[f"{sim.corpus}_without_head"] = macro_f1(sim.labels, sim.verdicts(None), list(VERDICTS))
    full = (head or fit_head(sims)) if unfitted else None
    taught = {}
    if teacher is not None:
        fewer = grouped_verdicts(sims, fit_head, grade, folds=folds, seed=seed, graded=teacher)
        taught = {s.corpus: f1_2way(s, fewer[n]) for n, s in enumerate(teacher)}
    return HeadFigures({s.corpus: f1_2way(s, s.verdicts(None)) for s in sims},
                       {s.corpus: f1_2way(s, predicted[n]) for n, s in enumerate(sims)}, three, cross,
                       {s.corpus: len(s.head_rows()[0]) for s in sims},
                       {s.corpus: _confusion(s, predicted[n]) for n, s in enumerate(sims)}, taught,
                       unfitted_figures(unfitted or [], lambda s: s.verdicts(full), "without_head"))


def unfitted_figures(sims: list[Simulated], served: Callable[[Simulated], list[str]],
                     alone: str) -> dict[str, float]:
    """Sets outside a head's fit, each graded by `served` (the head fitted on every set): 2-way, 3-way ("_3way")
    and 2-way without the head ("_" + `alone`)."""
    out = {}
    for sim in sims:
        verdicts = served(sim)
        out[sim.corpus] = f1_2way(sim, verdicts)
        out[f"{sim.corpus}_3way"] = macro_f1(sim.labels, verdicts, list(VERDICTS))
        out[f"{sim.corpus}_{alone}"] = f1_2way(sim, sim.verdicts(None))
    return out


def manifest(head: ExampleHead, figures: HeadFigures, decision: str) -> dict[str, Any]:
    """examples.json: the head's weights, the version of the decision it reads again (`decision`: a refit of
    that decision calls for a refit of the head), the recipe, the data's hashes and the figures."""
    return {**head.to_dict(),
            "decision": decision,
            "recipe": {"l2": L2, "folds": FOLDS, "example_folds": EXAMPLE_FOLDS, "seed": SEED,
                       "min_examples": MIN_EXAMPLES, "nearest": NEAREST, "temperature": TEMPERATURE,
                       "sharpness": STYLE_SHARPNESS, "floor": STYLE_FLOOR, "own_lines": sorted(OWN_LINES),
                       "teacher": list(TEACHER),
                       "inputs": list(INPUTS), "credit_from": sorted(CREDIT_FROM),
                       "beetle_folds": [{"fold": fold, "judge": train_holdout(fold)} for fold in HOLDOUTS],
                       "labels": "the ASAG splits' 2-way labels (examples correct/incorrect); the inline answers' "
                                 "3-way labels"},
            "data": {**{f"{c}_train.jsonl": file_sha256(ASAG_DIR / f"{c}_train.jsonl") for c in CORPORA},
                     "inline_answers.jsonl": file_sha256(INLINE_PATH),
                     "dev.jsonl (graded, not fitted)": file_sha256(DEV_PATH)},
            "figures": figures.to_dict()}


def simulate_sets(encoder: Encoder, teacher: tuple[int, int] | None = None,
                  judges: dict[int, Judge] | None = None) -> list[Simulated]:
    """SciEntsBank, Beetle's questions (read by the held-out judges, or `judges`) and the inline answers, each
    answer graded with the other folds' answers to its question as examples (`teacher`: drawn down to that
    count)."""
    judges = judges if judges is not None else heldout_judges()
    return [simulate("scientsbank", encoder, teacher=teacher),
            beetle_heldout(encoder, judges, with_examples=True, teacher=teacher),
            simulate_inline(encoder, with_examples=True, teacher=teacher)]


def fit(encoder: Encoder) -> tuple[ExampleHead, HeadFigures, str]:
    """Simulate the three sets, measure the head in grouped CV and fit it on everything; with the version of the
    decision the simulations were graded with."""
    judges = heldout_judges()  # loaded (or their recordings read) once for both simulations
    sims = simulate_sets(encoder, judges=judges)
    head = fit_head(sims)
    figures = grouped_cv(sims, teacher=simulate_sets(encoder, TEACHER, judges), unfitted=[simulate_dev(encoder)],
                         head=head)
    return head, figures, decision_of(sims)


def without_examples(encoder: Encoder) -> dict[str, dict[str, float]]:
    """Correct-vs-not macro-F1 of the served grader given no examples (as the unseen-questions splits are
    graded), per split: with the foreign head (as served) and by the decision alone."""
    from app.grading.foreign import load_foreign

    out = {}
    for corpus in CORPORA:
        sim = simulate(corpus, encoder, with_examples=False)
        out[corpus] = {"served": f1_2way(sim, sim.verdicts(None, foreign=load_foreign())),
                       "decision_alone": f1_2way(sim, sim.verdicts(None))}
    return out


def main(argv: list[str] | None = None) -> None:
    """Fit, print the figures and write app/grading/examples.json (`--check`: print only)."""
    from ingest.embedder import SentenceTransformerEncoder

    args = sys.argv[1:] if argv is None else argv
    head, figures, decision = fit(SentenceTransformerEncoder())
    print(json.dumps(figures.to_dict(), indent=1))
    if "--check" not in args:
        EXAMPLES_PATH.write_text(json.dumps(manifest(head, figures, decision), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {EXAMPLES_PATH}")


if __name__ == "__main__":
    main()
