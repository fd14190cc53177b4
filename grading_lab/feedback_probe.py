"""What the grader tells learners beside its verdict, on labelled files: does it say something false?

Three things are counted, per verdict and per label, with the grader as served (both judges on bank
questions; `--no-late`: the decision of `decision.json` alone, as the example head's questions, inline
questions and the PyTorch fallback are graded):

- the answers told they match a common misconception (`matched_misconception`);
- the answers told they are closer to the answer of a different question (`judge.ANSWERS_OTHER`);
- the flags that say an answer is wrong (a swap, a negation, another question's answer) on a `correct`
  verdict;
- the answers told they say the opposite of the accepted answer, by label and by whether the answer's
  kind is `negation` (an answer of another kind told so is told something false).

A right or partial answer told it holds a misconception is told something false; so is a correct verdict
whose flags say the roles are swapped, and an answer of another kind than a negation told it says the
opposite. (That an answer is closer to another question's answer is what the grader measured, true of every
answer told it; the count shows how often, and the verdicts it goes with.) The default files are every
labelled file outside the blind set (docs/GRADING_LOG.md, "What the grader tells learners").

`--restated` lists instead the pairs of bank questions nearest each other (cosine of the questions' own
vectors), which `rubric.RESTATED` reads as one question asked twice.

    python -m grading_lab.feedback_probe [FILE ...] [--no-late] [--list STATEMENT]
    python -m grading_lab.feedback_probe --restated
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from app.config import DATA_DIR, Settings
from app.grading.grader import WRONG_FLAGS, GradeResult, Graders, grade_many
from app.grading.judge import ANSWERS_OTHER, SAYS_OPPOSITE
from app.grading.judges import offline_late_judge
from app.grading.rubric import RESTATED, Rubric
from grading_lab.devset import read_rows
from grading_lab.evaluation import MemoEncoder, bank_items, bank_rubrics, rubrics_of

# The labelled answers to bank questions outside the blind and weak-kinds sets (the inline answers' questions are
# not the bank's: they have no neighbours or wrong options to be told of).
DEFAULT_FILES = (*sorted(p for p in (DATA_DIR / "train").glob("*answers*.jsonl") if p.name != "inline_answers.jsonl"),
                 *(DATA_DIR / "eval" / f"{name}.jsonl"
                   for name in ("dev", "evasive", "near_copies", "roles", "swaps", "swaps_more")))


STATEMENTS = ("misconception", "other_question", "wrong_flags_on_correct", "opposite")


def statements(result: GradeResult) -> list[str]:
    """What of STATEMENTS the grader told this answer."""
    out = []
    if result.matched_misconception is not None:
        out.append("misconception")
    if ANSWERS_OTHER in result.feedback:
        out.append("other_question")
    if result.verdict == "correct" and any(f in WRONG_FLAGS for f in result.flags):
        out.append("wrong_flags_on_correct")
    if SAYS_OPPOSITE in result.feedback:
        out.append("opposite")
    return out


def told(rows: list[dict[str, Any]], results: list[GradeResult]) -> dict[str, dict[str, int]]:
    """Per kind of statement, how many answers were told it, by "verdict/label" ("verdict/label/negation"
    or ".../other kind" for `opposite`)."""
    counts: dict[str, Counter[str]] = {name: Counter() for name in STATEMENTS}
    for row, result in zip(rows, results, strict=True):
        key = f"{result.verdict}/{row['label']}"
        for name in statements(result):
            kind = ("negation" if row.get("kind") == "negation" else "other kind") if name == "opposite" else None
            counts[name][f"{key}/{kind}" if kind else key] += 1
    return {name: dict(sorted(c.items())) for name, c in counts.items()}


def nearest_questions(rubrics: list[Rubric], at_least: float = 0.6) -> list[tuple[float, str, str]]:
    """Pairs of questions whose questions' vectors are at least `at_least` near (cosine), nearest first."""
    pairs = [(float(a.question_vec @ b.question_vec), a.item.question, b.item.question)
             for i, a in enumerate(rubrics) for b in rubrics[i + 1:]]
    return sorted((p for p in pairs if p[0] >= at_least), reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, default=list(DEFAULT_FILES))
    parser.add_argument("--no-late", action="store_true", help="the decision alone, without the late judge")
    parser.add_argument("--restated", action="store_true", help="only the bank's nearest pairs of questions")
    parser.add_argument("--list", choices=STATEMENTS, help="also print each answer told this, with its feedback")
    args = parser.parse_args()
    from ingest.embedder import SentenceTransformerEncoder

    encoder = MemoEncoder(SentenceTransformerEncoder(Settings().model))
    if args.restated:
        for cosine, one, other in nearest_questions(list(bank_rubrics(encoder).values())):
            print(f"{cosine:.2f}{' restated' if cosine >= RESTATED else ''}\n  {one}\n  {other}")
        return
    graders = Graders(no_late=True) if args.no_late else Graders(late=offline_late_judge())
    rows = [row for path in args.files for row in read_rows(path)]
    results = grade_many(rubrics_of(rows, bank_items(), encoder), [r["answer"] for r in rows], encoder,
                         graders=graders)
    if args.list:
        for row, result in zip(rows, results, strict=True):
            if args.list in statements(result):
                print(f"{result.verdict}/{row['label']}/{row.get('kind')}: {row['answer']}\n  -> {result.feedback}")
    print(json.dumps({"answers": len(rows), "late_judge": not args.no_late, **told(rows, results)}, indent=1))


if __name__ == "__main__":
    main()
