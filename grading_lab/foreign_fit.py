"""Fit the foreign head (app/grading/foreign.py): `python -m grading_lab.foreign_fit [--write]`, or `... --record`.

The head is for questions from outside the bank with no labelled examples, as the public "unseen
questions" and "unseen domains" splits are graded. It is fitted on answers graded that way through
the served path (grading_lab/examples_cv.py, with no examples) whose pair-judge readings are honest,
since the decision leans on the judge and a judge reading its own training answers is surer than on
new ones:

- SciEntsBank's training split: the judge never trained on it;
- Beetle's training answers to the questions of ASAG folds 0 and 1 (HOLDOUTS), each fold read by a
  judge trained like the shipped one without it (`tutor models train-judge --holdout K --no-measure
  --out data/cache/judge-holdoutK`, about 20 minutes each on 2 cores); the shipped judge trained on
  every Beetle training answer;
- the dev set, each question passed as the inline form passes it (text and accepted answers only):
  the judge never trained on it (the decision did, so this part flatters the decision).

The three sets weigh the same, each class-balanced. Figures: cross-validation grouped by question over
the sets pooled; SciEntsBank grouped by module as well (a module's questions held out together, as
the unseen-domains split holds out domains); and each set graded by the head fitted on the other two.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from app.config import DATA_DIR, JUDGE_DIR, PROJECT_ROOT
from app.grading import Graders
from app.grading.decision import VERDICTS
from app.grading.foreign import FEATURES, FOREIGN_PATH, INPUTS, CreditHead, ForeignHead
from app.grading.heads import H, Style, StyledLines
from app.grading.judges import Judge, default_judge, load_judge
from app.grading.latejudge import is_late
from app.grading.pairjudge import MANIFEST
from grading_lab import readings
from grading_lab.asag import ASAG_DIR
from grading_lab.examples_cv import DEV_PATH, SEED, Simulated, concat, simulate, simulate_dev, split_rows
from grading_lab.examples_fit import (
    L2,
    Grouping,
    by_question,
    decision_of,
    f1_2way,
    fit_logistic_head,
    grouped_verdicts,
)
from grading_lab.judge_train import HOLDOUT_FOLDS, Recipe, asag_label, holdout_fold, recipe_of
from grading_lab.logreg import macro_f1
from ingest.embedder import Encoder
from ingest.identity import file_sha256

HEAD_VERSION = "foreign-10"  # a refit gets a new version: results name the head that graded them
FOLDS = 5  # folds of questions for the head's cross-validation
HOLDOUTS = (0, 1)  # the ASAG folds whose Beetle questions the fit reads, each with a judge that never saw it


# How sharply a question's nearness to each style's questions picks that style's line (the softmax of this times
# the cosines), and the cosine at which the line fitted on every style together counts as much as a style's own
# (heads.StyledLines). Grouped CV (`python -m grading_lab.foreign_fit`, seed 13; SciEntsBank /
# Beetle's held-out questions / the dev set inline): sharpness 5 reads 0.630 / 0.738 / 0.956, 10 0.656 / 0.726 /
# 0.956, 20 0.667 / 0.720 / 0.954, 50 0.664 / 0.717 / 0.954; the floor from 0.15 to 0.3 moves these by at most
# 0.01 and lifts the dev set graded by the head fitted on the other two sets from 0.869 (no floor) to 0.895-0.913
# (docs/GRADING_LOG.md, "One line per style of question (foreign-10)").
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
               keep: list[set[str]] | None = None) -> StyledLines[H]:
    """P(correct) drawn per style (heads.StyledLines): each set's own line with the unit mean of its questions'
    vectors, and the line of every set together, each fitted as `fit_logistic_head` fits (on the questions in
    `keep`, per set; all if None). A set none of whose questions the fit keeps (a fold that holds out all of
    them) has no style in it."""
    styles = []
    for n, sim in enumerate(sims):
        kept = None if keep is None else keep[n]
        if kept is not None and not any(sim.groups[i] in kept for i in sim.cases):
            continue
        mean = question_vectors(sim, kept).mean(axis=0)
        line = fit_logistic_head(cls, version, [weighed[n]], [sim], None if kept is None else [kept])
        styles.append(Style(sim.corpus, mean / np.linalg.norm(mean), line))
    return StyledLines(tuple(styles), fit_logistic_head(cls, version, weighed, sims, keep), STYLE_SHARPNESS,
                       STYLE_FLOOR)


def holdout_dir(fold: int) -> Path:
    """Where the judge trained without ASAG fold `fold` is kept (not shipped; rebuilt by `train_holdout`)."""
    return DATA_DIR / "cache" / f"judge-holdout{fold}"


def train_holdout(fold: int) -> str:
    """The command that trains the judge without ASAG fold `fold`."""
    out = holdout_dir(fold).relative_to(PROJECT_ROOT)
    late = " --late" if is_late(JUDGE_DIR) else ""
    return f"tutor models train-judge{late} --holdout {fold} --no-measure --out {out}"


def by_module(corpus: str, question: str) -> str:
    """SciEntsBank's questions by module (the id's prefix, "EM_45b" -> "EM"); the others by question."""
    return question.split("_")[0] if corpus == "scientsbank" else question


def heldout_judge(fold: int, folder: Path | None = None, record: bool = False) -> Judge:
    """The judge trained like the shipped one, less ASAG fold `fold`, or its recorded readings
    (`readings.kept_judge`; `record` records them); refuses one made otherwise."""
    folder = folder or holdout_dir(fold)
    judge = readings.kept_judge(folder, f"holdout-pair-{fold}", load_judge, train_holdout(fold), record)
    if judge is None:
        raise SystemExit(f"no held-out judge in {folder} and no recording of its readings (run "
                         f"`{train_holdout(fold)}`, about 20 minutes on 2 cores)")
    shipped = default_judge()
    made = lambda j: (j.manifest["data"], {**asdict(recipe_of(j.manifest)), "holdout": None})  # noqa: E731
    if judge.manifest["recipe"].get("holdout") != fold or made(judge) != made(shipped):
        raise SystemExit(f"the judge in {folder} was not made like the shipped one less fold {fold} "
                         f"(run `{train_holdout(fold)}`)")
    return judge


def beetle_heldout(encoder: Encoder, judges: dict[int, Judge]) -> Simulated:
    """Beetle's answers to the questions of the folds in `judges`, each fold read by its judge, with their
    3-way labels (Beetle's 5-way labels tell partial from incorrect)."""
    rows = split_rows("beetle")
    parts = []
    for fold, judge in sorted(judges.items()):
        mine = [r for r in rows if holdout_fold(f"beetle:{r['question_id']}", Recipe.seed) == fold]
        sim = simulate("beetle", encoder, Graders(judge=judge), with_examples=False, rows=mine)
        parts.append(replace(sim, labels=[asag_label(r) for r in mine]))
    return concat(parts, "beetle_heldout")


def simulate_sets(encoder: Encoder, judges: dict[int, Judge] | None = None) -> list[Simulated]:
    """SciEntsBank, Beetle's held-out questions (read by the held-out judges) and the dev set inline, each
    graded with no labelled examples."""
    judges = judges if judges is not None else {fold: heldout_judge(fold) for fold in HOLDOUTS}
    return [simulate("scientsbank", encoder, with_examples=False), beetle_heldout(encoder, judges),
            simulate_dev(encoder, inline=True)]


def fit_head(sims: list[Simulated], keep: list[set[str]] | None = None) -> ForeignHead:
    """The head fitted on the answers it weighs, of the questions in `keep` (per set; all if None): P(correct)
    with one line per set and one over all of them (`fit_styled`), P(correct or partial) on the sets whose
    labels have partial (where none have, the pooled P(correct))."""
    weighed = [s.foreign_rows() for s in sims]
    correct = fit_styled(CreditHead, HEAD_VERSION, weighed, sims, keep)
    three = [n for n, s in enumerate(sims) if "partial" in s.labels]
    if not three:
        return ForeignHead(correct, correct.pooled, HEAD_VERSION)
    credit = fit_logistic_head(CreditHead, HEAD_VERSION, [weighed[n] for n in three], [sims[n] for n in three],
                               None if keep is None else [keep[n] for n in three],
                               targets=[np.array([label != "incorrect" for label in sims[n].labels], dtype=float)
                                        for n in three])
    return ForeignHead(correct, credit, HEAD_VERSION)


def grouped(sims: list[Simulated], group: Grouping, folds: int = FOLDS, seed: int = SEED) -> list[list[str]]:
    """Every answer's verdict from a foreign head fitted without its group's answers (folds of groups, all
    sets pooled)."""
    return grouped_verdicts(sims, fit_head, lambda s, head, rows: s.verdicts(None, rows, foreign=head), group,
                            folds, seed)


def figures(sims: list[Simulated]) -> dict[str, Any]:
    """Correct-vs-not macro-F1 per set: the decision alone, the head in grouped CV (by question; by
    module), each set by the others' fit; 3-way macro-F1 where the labels have partial."""
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
            "beetle_folds": [{"fold": fold, "of": HOLDOUT_FOLDS, "judge": train_holdout(fold),
                              "judge_version": judge.version,
                              "judge_alone_on_the_fold": judge.manifest.get("asag_heldout")}
                             for fold, judge in sorted(judges.items())],
            "labels": "2-way (correct vs not): the ASAG splits' label_2way, the dev set's correct",
        },
        "data": {
            "beetle_train.jsonl": file_sha256(ASAG_DIR / "beetle_train.jsonl"),
            "scientsbank_train.jsonl": file_sha256(ASAG_DIR / "scientsbank_train.jsonl"),
            "dev.jsonl": file_sha256(DEV_PATH),
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
        beetle_heldout(SentenceTransformerEncoder(), present)
        for path in readings.save_all({f"holdout-pair-{fold}": judge for fold, judge in present.items()}):
            print(f"recorded {path}")
        return
    judges = {fold: heldout_judge(fold) for fold in HOLDOUTS}
    sims = simulate_sets(SentenceTransformerEncoder(), judges)
    figs = figures(sims)
    print(json.dumps(figs, indent=1))
    if "--write" in args:
        written = manifest(fit_head(sims), figs, judges, decision_of(sims))
        FOREIGN_PATH.write_text(json.dumps(written, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {FOREIGN_PATH}")


if __name__ == "__main__":
    main()
