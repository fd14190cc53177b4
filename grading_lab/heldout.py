"""Beetle's answers read by judges that never trained on their questions, for the heads' fits.

The shipped pair judge trained on every Beetle training answer, so its readings of those answers are surer
than its readings of a new answer, and a head fitted on them learns to lean on the decision (which leans on
the judge) more than a new answer warrants. The foreign head (grading_lab/foreign_fit.py) and the example
head (grading_lab/examples_fit.py) read instead Beetle's answers fold by fold (the five ASAG folds of
HOLDOUTS: every Beetle question), each fold read by a judge trained like the shipped one without it
(`tutor models train-judge --holdout K --no-measure --out data/cache/judge-holdoutK`, about 20 minutes each
on 2 cores), or by the recording of its readings that data/train/readings/ keeps (grading_lab/readings.py).
"""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from app.config import DATA_DIR, JUDGE_DIR, PROJECT_ROOT
from app.grading import Graders
from app.grading.judges import Judge, default_judge, load_judge
from app.grading.latejudge import is_late
from grading_lab import readings
from grading_lab.examples_cv import Simulated, concat, simulate, split_rows
from grading_lab.judge_train import Recipe, asag_label, holdout_fold, recipe_of
from ingest.embedder import Encoder

HOLDOUTS = (0, 1, 2, 3, 4)  # the ASAG folds whose Beetle questions the fits read, each with a judge that never saw it
NAME = "beetle_heldout"  # the set's name in the heads' styles and figures


def holdout_dir(fold: int) -> Path:
    """Where the judge trained without ASAG fold `fold` is kept (not shipped; rebuilt by `train_holdout`)."""
    return DATA_DIR / "cache" / f"judge-holdout{fold}"


def train_holdout(fold: int) -> str:
    """The command that trains the judge without ASAG fold `fold`."""
    out = holdout_dir(fold).relative_to(PROJECT_ROOT)
    late = " --late" if is_late(JUDGE_DIR) else ""
    return f"tutor models train-judge{late} --holdout {fold} --no-measure --out {out}"


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


def heldout_judges() -> dict[int, Judge]:
    """The judge (or recording) of every fold in HOLDOUTS."""
    return {fold: heldout_judge(fold) for fold in HOLDOUTS}


def beetle_heldout(encoder: Encoder, judges: dict[int, Judge], with_examples: bool = False,
                   teacher: tuple[int, int] | None = None) -> Simulated:
    """Beetle's answers to the questions of the folds in `judges`, each fold read by its judge, with their
    3-way labels (Beetle's 5-way labels tell partial from incorrect); graded with no examples, or
    (`with_examples`) with the other folds' answers to the question as examples (`teacher`: as
    `examples_cv.simulate`'s)."""
    rows = split_rows("beetle")
    parts = []
    for fold, judge in sorted(judges.items()):
        mine = [r for r in rows if beetle_fold(r) == fold]
        sim = simulate("beetle", encoder, Graders(judge=judge), with_examples=with_examples, rows=mine,
                       teacher=teacher)
        parts.append(replace(sim, labels=[asag_label(r) for r in mine]))
    return concat(parts, NAME)


def beetle_fold(row: dict[str, Any]) -> int:
    """The ASAG fold of a Beetle training answer's question, as the judges' trainings deal them."""
    return holdout_fold(f"beetle:{row['question_id']}", Recipe.seed)
