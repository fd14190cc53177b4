"""How much a final full stop moves the judges and the grader, on labelled files.

The project's written answers end in "." far more often when they are wrong than when they are right
(`--counts`; docs/GRADING_LOG.md, "Final full stops"), so a grader that reads the stop is flattered on them and
not on answers written elsewhere. This probe reads each file three ways: as written, with every final
full stop removed, and with one on every answer. It reports the judges alone, each against the
question's first accepted answer (its most probable label), and with `--served` the grader as served
(both judges on bank questions). The grader reads answers without their final stops
(app/grading/grader.py: _precheck), so its three rows are the same; a judge folder given with
`--judge` or `--late` is read alone, as it is.

    python -m grading_lab.stop_probe [FILE ...] [--judge DIR] [--late DIR] [--served] [--counts]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from app.config import DATA_DIR, JUDGE_DIR, LATE_JUDGE_DIR, Settings
from app.grading.decision import VERDICTS
from app.grading.grader import Graders, grade_many
from app.grading.judges import Judge, load_judge, offline_late_judge
from app.grading.text import without_final_stops
from grading_lab.devset import read_rows
from grading_lab.evaluation import MemoEncoder, bank_items, rubrics_of
from grading_lab.logreg import macro_f1

DEFAULT_FILES = (DATA_DIR / "eval" / "dev.jsonl", DATA_DIR / "eval" / "near_copies.jsonl",
                 *(DATA_DIR / "train" / f"written_answers_{s}.jsonl" for s in "defg"))


def with_final_stop(answer: str) -> str:
    """The answer ending in one full stop."""
    return without_final_stops(answer) + "."


FORMS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("as written", lambda a: a),
    ("no final stop", without_final_stops),
    ("every one with a final stop", with_final_stop),
)


def stop_counts(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Per label, how many answers end in a full stop, of how many."""
    out = {}
    for label in VERDICTS:
        mine = [r for r in rows if r["label"] == label]
        if mine:
            out[label] = f"{sum(r['answer'].rstrip().endswith('.') for r in mine)} of {len(mine)}"
    return out


def scores(truth: list[str], pred: list[str]) -> dict[str, Any]:
    """3-way and correct-vs-not macro-F1, wrong answers called correct, right answers not called correct."""
    two = lambda labels: ["correct" if x == "correct" else "not" for x in labels]  # noqa: E731
    pairs = list(zip(truth, pred, strict=True))
    return {"3-way": round(macro_f1(truth, pred, list(VERDICTS)), 3),
            "2-way": round(macro_f1(two(truth), two(pred), ["correct", "not"]), 3),
            "wrong_called_correct": sum(t == "incorrect" and p == "correct" for t, p in pairs),
            "right_not_called_correct": sum(t == "correct" and p != "correct" for t, p in pairs)}


def read_alone(judge: Judge, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The judge alone on each form of the answers."""
    items = bank_items()
    targets = [items[(r["file"], int(r["number"]))] for r in rows]
    truth = [r["label"] for r in rows]
    out = []
    for name, form in FORMS:
        probs = judge.probabilities([(item.question, item.reference_answers[0], form(r["answer"]))
                                     for item, r in zip(targets, rows, strict=True)])
        out.append({"answers": name, **scores(truth, [VERDICTS[int(k)] for k in np.argmax(probs, axis=1)])})
    return out


def served(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The grader as served (the committed judges and decisions) on each form of the answers."""
    from ingest.embedder import SentenceTransformerEncoder

    encoder = MemoEncoder(SentenceTransformerEncoder(Settings().model))
    targets = rubrics_of(rows, bank_items(), encoder)
    graders = Graders(late=offline_late_judge())
    truth = [r["label"] for r in rows]
    out = []
    for name, form in FORMS:
        results = grade_many(targets, [form(r["answer"]) for r in rows], encoder, graders=graders)
        out.append({"answers": name, **scores(truth, [res.verdict for res in results])})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, default=list(DEFAULT_FILES))
    parser.add_argument("--judge", type=Path, default=None, help="a pair judge folder, read alone")
    parser.add_argument("--late", type=Path, default=None, help="a late judge folder, read alone")
    parser.add_argument("--served", action="store_true", help="the grader as served")
    parser.add_argument("--counts", action="store_true", help="only how many answers end in a full stop, per label")
    args = parser.parse_args()
    judges: dict[str, Judge] = {}
    if not args.counts:
        judges["pair judge"] = load_judge(args.judge or JUDGE_DIR)
        late_dir = args.late or LATE_JUDGE_DIR
        judges["late judge"] = offline_late_judge(Settings(late_judge_dir=late_dir))
    for path in args.files:
        rows = read_rows(path)
        report: dict[str, Any] = {"file": path.name, "final_stops": stop_counts(rows)}
        for name, judge in judges.items():
            report[name] = read_alone(judge, rows)
        if args.served and not args.counts:
            report["served"] = served(rows)
        print(json.dumps(report))


if __name__ == "__main__":
    main()
