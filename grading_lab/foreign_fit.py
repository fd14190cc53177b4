"""Fit the foreign head (app/grading/foreign.py): `python -m grading_lab.foreign_fit [--write]`, or `... --record`.

The head is for questions from outside the bank with no labelled examples, as the public "unseen
questions" and "unseen domains" splits are graded. It is fitted on answers graded that way through
the served path (grading_lab/examples_cv.py, with no examples) whose pair-judge readings are honest,
since the decision leans on the judge and a judge reading its own training answers is surer than on
new ones:

- SciEntsBank's training split: the judge never trained on it;
- Beetle's training answers, the questions of each of the five ASAG folds read by a judge trained
  like the shipped one without it (grading_lab/heldout.py); the shipped judge trained on every Beetle
  training answer;
- answers to 60 questions outside the bank in this product's field (data/train/inline_answers.jsonl), each
  question passed as the inline form passes it (text and accepted answers only): neither the judge nor the
  decision trained on them.

The dev set passed inline is not in the fit: the decision was fitted on its answers, so its readings of them
are surer than of a new answer, and a line fitted on them learnt to trust the decision where a new question
from this field should not (docs/GRADING_LOG.md, "Questions from outside the bank in this field
(foreign-12)"); it is graded by the head fitted on the three sets, for comparison.

The three sets weigh the same, each class-balanced. Figures: cross-validation grouped by question over
the sets pooled; SciEntsBank grouped by module as well (a module's questions held out together, as
the unseen-domains split holds out domains); and each set graded by the head fitted on the other two.
The frozen data/eval/inline.jsonl (20 more questions, by four of the same authors) is read by `tutor eval`,
once per head version.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from app.grading.decision import VERDICTS
from app.grading.foreign import FEATURES, FOREIGN_PATH, INPUTS, CreditHead, ForeignHead
from app.grading.judges import Judge
from app.grading.pairjudge import MANIFEST
from grading_lab import readings
from grading_lab.asag import ASAG_DIR
from grading_lab.examples_cv import DEV_PATH, INLINE_PATH, SEED, Simulated, simulate, simulate_dev, simulate_inline
from grading_lab.examples_fit import (
    L2,
    STYLE_FLOOR,
    STYLE_SHARPNESS,
    Grouping,
    by_question,
    decision_of,
    f1_2way,
    fit_credit,
    fit_styled,
    grouped_verdicts,
    unfitted_figures,
)
from grading_lab.heldout import HOLDOUTS, beetle_heldout, heldout_judge, heldout_judges, holdout_dir, train_holdout
from grading_lab.judge_train import HOLDOUT_FOLDS
from grading_lab.logreg import macro_f1
from ingest.embedder import Encoder
from ingest.identity import file_sha256

HEAD_VERSION = "foreign-13"  # a refit gets a new version: results name the head that graded them
FOLDS = 5  # folds of questions for the head's cross-validation
# The sets P(correct or partial)'s pooled line is fitted on (each set with partial labels has its own line as
# well): the inline answers, labelled by this project's rules. Grouped CV over fold seeds 13, 1, 2 and 3 (`python
# -m grading_lab.foreign_fit`), 3-way macro-F1 Beetle / inline answers: a line per set, pooled over the inline
# answers 0.531 / 0.760, pooled over both 0.519 / 0.751; one line over the inline answers alone 0.597 / 0.760, but
# it gave partial credit to 449 of Beetle's 1,357 wrong answers (86 with a line per set) (docs/GRADING_LOG.md,
# "Questions from outside the bank in this field (foreign-12)").
CREDIT_FROM = frozenset({"inline_answers"})
# The inline answers' authors (the first letter of each qid, data/train/README.md) whose answers the head is fitted
# on. Authors I to L's answers made the head stricter with everyone else's right answers: in CV grouped by author
# (seed 13), of A to H's 300 right answers, 41 graded incorrect against 22 without them (wrong ones graded correct 32
# of 360 against 37), and on the dev set passed inline 46 of 170 against 22; A to H's correct-vs-not fell 0.891 to
# 0.883 over fold seeds 13, 1, 2 and 3, and I to L's own rose only to 0.865 from the 0.850 the head fitted without
# them reads. A right answer called wrong costs a learner more than a wrong one let through, so the head keeps A to
# H (docs/GRADING_LOG.md, "Four more authors (examples-14)"); the example head is fitted on every author.
AUTHORS = frozenset("ABCDEFGH")


def by_module(corpus: str, question: str) -> str:
    """SciEntsBank's questions by module (the id's prefix, "EM_45b" -> "EM"); the others by question."""
    return question.split("_")[0] if corpus == "scientsbank" else question


def simulate_sets(encoder: Encoder, judges: dict[int, Judge] | None = None) -> list[Simulated]:
    """SciEntsBank, Beetle's questions (each fold read by its held-out judge) and the inline training answers,
    each graded with no labelled examples."""
    judges = judges if judges is not None else heldout_judges()
    return [simulate("scientsbank", encoder, with_examples=False), beetle_heldout(encoder, judges),
            simulate_inline(encoder, authors=AUTHORS)]


def fit_head(sims: list[Simulated], keep: list[set[str]] | None = None) -> ForeignHead:
    """The head fitted on the answers it weighs, of the questions in `keep` (per set; all if None): P(correct)
    with one line per set and one over all of them (`fit_styled`); P(correct or partial) with one line per set
    whose labels have partial and one over the sets of CREDIT_FROM (over all of those sets, without them);
    where no set's labels have partial, the P(correct) lines."""
    weighed = [s.foreign_rows() for s in sims]
    correct = fit_styled(CreditHead, HEAD_VERSION, weighed, sims, keep)
    three = [n for n, s in enumerate(sims) if "partial" in s.labels]
    if not three:
        return ForeignHead(correct, correct, HEAD_VERSION)
    return ForeignHead(correct, fit_credit(CreditHead, HEAD_VERSION, weighed, sims, keep, three, pooled=CREDIT_FROM),
                       HEAD_VERSION)


def grouped(sims: list[Simulated], group: Grouping, folds: int = FOLDS, seed: int = SEED) -> list[list[str]]:
    """Every answer's verdict from a foreign head fitted without its group's answers (folds of groups, all
    sets pooled)."""
    return grouped_verdicts(sims, fit_head, lambda s, head, rows: s.verdicts(None, rows, foreign=head), group,
                            folds, seed)


def figures(sims: list[Simulated], unfitted: list[Simulated] | None = None,
            head: ForeignHead | None = None) -> dict[str, Any]:
    """Correct-vs-not macro-F1 per set: the decision alone, the head in grouped CV (by question; by
    module), each set by the others' fit; 3-way macro-F1 where the labels have partial. `unfitted`: sets
    outside the fit, graded by the head fitted on every set (`head`, when the caller has it)."""
    by_q, by_m = grouped(sims, by_question), grouped(sims, by_module)
    out: dict[str, Any] = {
        "decision_alone": {},
        "grouped_cv": {},
        "grouped_cv_by_module": {},
        "others_fit": {},
        "grouped_cv_3way": {},
        "decision_alone_3way": {},
        "answers": {},
    }
    for n, s in enumerate(sims):
        alone = s.verdicts(None)
        others = fit_head([t for m, t in enumerate(sims) if m != n])
        out["decision_alone"][s.corpus] = f1_2way(s, alone)
        out["grouped_cv"][s.corpus] = f1_2way(s, by_q[n])
        out["grouped_cv_by_module"][s.corpus] = f1_2way(s, by_m[n])
        out["others_fit"][s.corpus] = f1_2way(s, s.verdicts(None, foreign=others))
        out["answers"][s.corpus] = {
            "all": len(s.groups),
            "weighed": len(s.foreign_rows()[0]),
            "questions": len(set(s.groups)),
        }
        if "partial" in s.labels:
            out["grouped_cv_3way"][s.corpus] = macro_f1(s.labels, by_q[n], list(VERDICTS))
            out["decision_alone_3way"][s.corpus] = macro_f1(s.labels, alone, list(VERDICTS))
    full = (head or fit_head(sims)) if unfitted else None
    out["unfitted"] = unfitted_figures(unfitted or [], lambda s: s.verdicts(None, foreign=full), "decision_alone")
    return {k: {c: round(v, 4) if isinstance(v, float) else v for c, v in d.items()} for k, d in out.items()}


def manifest(head: ForeignHead, figs: dict[str, Any], judges: dict[int, Judge], decision: str) -> dict[str, Any]:
    """foreign.json: the head's weights, the version of the decision it reads again (`decision`: a refit of
    that decision calls for a refit of the head), the recipe, the data's hashes and the figures."""
    return {
        **head.to_dict(),
        "decision": decision,
        "recipe": {
            "l2": L2,
            "folds": FOLDS,
            "seed": SEED,
            "sharpness": STYLE_SHARPNESS,
            "floor": STYLE_FLOOR,
            "inputs": list(INPUTS),
            "features": list(FEATURES),
            "inline_authors": sorted(AUTHORS),
            "beetle_folds": [{"fold": fold, "of": HOLDOUT_FOLDS, "judge": train_holdout(fold),
                              "judge_version": judge.version,
                              "judge_alone_on_the_fold": judge.manifest.get("asag_heldout")}
                             for fold, judge in sorted(judges.items())],
            "labels": "P(correct): the ASAG splits' label_2way, the inline answers' correct; P(correct or partial): "
                      "the inline answers' 3-way labels",
        },
        "data": {
            "beetle_train.jsonl": file_sha256(ASAG_DIR / "beetle_train.jsonl"),
            "scientsbank_train.jsonl": file_sha256(ASAG_DIR / "scientsbank_train.jsonl"),
            "inline_answers.jsonl": file_sha256(INLINE_PATH),
            "dev.jsonl (graded, not fitted)": file_sha256(DEV_PATH),
        },
        "figures": figs,
    }


def main(argv: list[str] | None = None) -> None:
    """Print the figures; with --write, fit on all three sets and write app/grading/foreign.json. `--record`
    records the readings of each held-out judge here on its fold's answers (grading_lab/readings.py), which
    a run without the judge replays, and fits nothing."""
    from ingest.embedder import SentenceTransformerEncoder

    args = sys.argv[1:] if argv is None else argv
    if "--record" in args:
        present = {fold: heldout_judge(fold, record=True) for fold in HOLDOUTS
                   if (holdout_dir(fold) / MANIFEST).is_file()}
        if not present:
            print("no held-out judge here to record")
            return
        encoder = SentenceTransformerEncoder()
        beetle_heldout(encoder, present)  # as this fit reads them, and as the example head's fit does:
        beetle_heldout(encoder, present, with_examples=True)
        for path in readings.save_all({f"holdout-pair-{fold}": judge for fold, judge in present.items()}):
            print(f"recorded {path}")
        return
    judges = heldout_judges()
    encoder = SentenceTransformerEncoder()
    sims = simulate_sets(encoder, judges)
    head = fit_head(sims)
    figs = figures(sims, unfitted=[simulate_dev(encoder, inline=True)], head=head)
    print(json.dumps(figs, indent=1))
    if "--write" in args:
        written = manifest(head, figs, judges, decision_of(sims))
        FOREIGN_PATH.write_text(json.dumps(written, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {FOREIGN_PATH}")


if __name__ == "__main__":
    main()
