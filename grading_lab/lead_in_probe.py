"""How far a content-free opening or closing moves the grader, with openings it was never shown.

`checks.strip_lead_in` cuts a few lead-ins before grading, `checks.strip_empty_edges` cuts openings
and closings of some forms, and a judge trained with `tutor models train-judge --lead-ins 1` sees
others on right and wrong answers alike (grading_lab/contrasts.py: OPENINGS, CLOSINGS). This probe
dresses the dev set's and the written files d..g's answers (no judge trains on them) with the openings
below, which are in neither list, and counts the wrong answers graded correct and the right answers
that lose it, as served (both judges on bank questions); then every answer with a final full stop and
without one (the grader reads the two alike: grading_lab/stop_probe.py). `strip_empty_edges` was
designed on PROBE_OPENINGS and PROBE_CLOSINGS; the held-out set (`--held-out`) was written before
it. Keep these openings out of training and out of every rule: a figure on openings a judge or a rule
was shaped on says little.

    python -m grading_lab.lead_in_probe [--judge DIR] [--late DIR | --no-late] [--held-out]

The judges alone on the same files, with and without final full stops: `python -m grading_lab.stop_probe`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from app.config import DATA_DIR, JUDGE_DIR, LATE_JUDGE_DIR, Settings
from app.grading.grader import Graders, grade_many
from app.grading.judges import load_judge, offline_late_judge
from app.grading.text import without_final_stops
from grading_lab.evaluation import MemoEncoder, bank_items, rubrics_of
from grading_lab.stop_probe import with_final_stop

PROBE_OPENINGS = (
    "Honestly, ", "To be honest, ", "Hm okay, ", "Mostly, ", "As I understand it, ", "My take: ",
    "Let me see... ",
)
PROBE_CLOSINGS = (" I'm fairly confident.", " Don't quote me on that.")
# A second set, written before any rule that cuts content-free edges was designed, and kept for
# reporting on it: no rule or list is tuned on these (`--held-out`).
HELD_OUT_OPENINGS = (
    "Real talk: ", "Off the top of my head, ", "Alrighty, ", "Here's my attempt: ", "Short version — ",
    "From memory: ", "Lemme ponder... ", "Gonna go with ", "Sooo, ", "Neat. ", "Wait, ",
)
HELD_OUT_CLOSINGS = (" Possibly off though.", " Thanks!", " Or so I recall.", " Happy to elaborate.")
PROBE_FILES = ("eval/dev.jsonl", *(f"train/written_answers_{s}.jsonl" for s in "defg"))


def probe_rows() -> list[dict[str, Any]]:
    """The right and the wrong answers the probe dresses (partial ones are left out)."""
    rows = []
    for name in PROBE_FILES:
        for line in (DATA_DIR / name).read_text(encoding="utf-8").splitlines():
            if line.strip() and (row := json.loads(line))["label"] in ("correct", "incorrect"):
                rows.append(row)
    return rows


def dressings(held_out: bool = False) -> list[tuple[str, str]]:
    """(opening, closing) pairs: none, each opening, each closing (of the held-out set, if asked)."""
    openings, closings = (HELD_OUT_OPENINGS, HELD_OUT_CLOSINGS) if held_out else (PROBE_OPENINGS, PROBE_CLOSINGS)
    return [("", ""), *((o, "") for o in openings), *(("", c) for c in closings)]


def dress(answer: str, opening: str = "", closing: str = "") -> str:
    """The answer with one probe opening or closing."""
    if closing:
        return answer.rstrip(". ") + "." + closing if closing[1:2].isupper() else answer + closing
    if opening.endswith(", ") and answer[:1].isupper() and answer.split()[0][1:].islower():
        answer = answer[0].lower() + answer[1:]
    return opening + answer


Variant = tuple[str, Callable[[str], str]]  # a name, and how an answer is dressed


def stop_variants() -> list[Variant]:
    """Every answer with a final full stop, and every answer without one, as grading_lab/stop_probe.py forms them."""
    return [("(every one ends in '.')", with_final_stop), ("(none ends in '.')", without_final_stops)]


def variants(held_out: bool = False) -> list[Variant]:
    """Each dressing of `dressings`, then (but for the held-out set) the `stop_variants`."""
    out: list[Variant] = [
        ((o or c).strip() or "(none)", partial(dress, opening=o, closing=c)) for o, c in dressings(held_out)]
    return out if held_out else out + stop_variants()


def run(judge_dir: Path, late_dir: Path | None, held_out: bool = False) -> list[dict[str, Any]]:
    """Per dressing: wrong answers graded correct and right answers not graded correct."""
    from ingest.embedder import SentenceTransformerEncoder

    settings = Settings()
    rows = probe_rows()
    encoder = MemoEncoder(SentenceTransformerEncoder(settings.model))
    targets = rubrics_of(rows, bank_items(), encoder)
    late = offline_late_judge(Settings(late_judge_dir=late_dir)) if late_dir is not None else None
    graders = Graders(judge=load_judge(judge_dir), late=late, no_late=late is None)
    out = []
    for name, dressed in variants(held_out):
        results = grade_many(targets, [dressed(r["answer"]) for r in rows], encoder, graders=graders)
        wrong = [res.verdict == "correct" for r, res in zip(rows, results, strict=True) if r["label"] == "incorrect"]
        right = [res.verdict != "correct" for r, res in zip(rows, results, strict=True) if r["label"] == "correct"]
        out.append({"dressing": name, "wrong_graded_correct": sum(wrong), "wrong": len(wrong),
                    "right_not_correct": sum(right), "right": len(right)})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--judge", type=Path, default=JUDGE_DIR, help="the pair judge's folder")
    parser.add_argument("--late", type=Path, default=LATE_JUDGE_DIR, help="the late judge's folder")
    parser.add_argument("--no-late", action="store_true", help="grade with the pair judge alone")
    parser.add_argument("--held-out", action="store_true", help="dress with the held-out openings and closings")
    args = parser.parse_args()
    rows = run(args.judge, None if args.no_late else args.late, args.held_out)
    print(f"{'dressing':<26} {'wrong graded correct':>22} {'right not correct':>19}")
    for r in rows:
        print(f"{r['dressing']:<26} {r['wrong_graded_correct']:>14} / {r['wrong']:<5} "
              f"{r['right_not_correct']:>11} / {r['right']:<5}")


if __name__ == "__main__":
    main()
