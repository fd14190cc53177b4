"""Layout 1: `Question N: text`, `- option` lines (one marked), `Correct answer:`, explanation."""

from __future__ import annotations

import re
from pathlib import Path

from ingest.parsers.base import (
    ParsedQuestion,
    ParseIssue,
    ParseResult,
    clean,
    is_trailer,
    number_too_large,
    question_number,
)

LAYOUT = "inline-options"

_QUESTION = re.compile(r"^Question\s+(\d+)\s*:\s*(\S.*)$")
_OPTION = re.compile(r"^[-*•]\s+(.*\S)\s*$")
# No leading \s*: searched for in an option, it made every space of a long run a new start that scanned the
# rest of the run (quadratic; a 20 000-space option took 2 s). Options are cleaned after the mark is cut.
_MARK = re.compile(r"\((?:correct answer|correct)\)\s*$", re.IGNORECASE)
_CORRECT = re.compile(r"^Correct answer\s*:\s*(.*)$", re.IGNORECASE)


def detect(lines: list[str]) -> bool:
    """True when the document has `Question N: text` lines."""
    return any(_QUESTION.match(line.strip()) for line in lines)


def _split_questions(lines: list[str]) -> tuple[list[tuple[int, list[str]]], int]:
    """Group lines under their `Question N:` line; return the groups and the title line."""
    groups: list[tuple[int, list[str]]] = []
    first = len(lines)
    for idx, raw in enumerate(lines):
        if _QUESTION.match(raw.strip()):
            if not groups:
                first = idx
            groups.append((idx, []))
        if groups:
            groups[-1][1].append(raw)
    return groups, first


def parse(path: Path, lines: list[str], title: str | None) -> ParseResult:
    """Parse a layout-1 document."""
    result = ParseResult(path=path, layout=LAYOUT, title=title)
    groups, first = _split_questions(lines)
    question_texts = {clean(_QUESTION.match(g[1][0].strip()).group(2)) for g in groups}  # type: ignore[union-attr]
    for idx in range(first):
        if not is_trailer(lines[idx], title, question_texts):
            result.issues.append(ParseIssue(path.name, idx + 1, "ignored text before the first question", "ignored"))
    for start, group in groups:
        question = _parse_one(path, start, group, title, question_texts, result.issues)
        if question is not None:
            result.questions.append(question)
    return result


def _parse_one(
    path: Path,
    start: int,
    group: list[str],
    title: str | None,
    question_texts: set[str],
    issues: list[ParseIssue],
) -> ParsedQuestion | None:
    head = _QUESTION.match(group[0].strip())
    assert head is not None
    number, text = question_number(head.group(1)), clean(head.group(2))
    if number is None:
        issues.append(number_too_large(path.name, start + 1, head.group(1), text))
        return None
    options: list[tuple[str, bool]] = []
    stated: str | None = None
    explanation: list[str] = []
    last_content = start
    for offset, raw in enumerate(group[1:], start=1):
        line = raw.strip()
        lineno = start + offset + 1
        if stated is None and (opt := _OPTION.match(line)):
            body = opt.group(1)
            options.append((clean(_MARK.sub("", body)), bool(_MARK.search(body))))
            last_content = start + offset
        elif stated is None and (correct := _CORRECT.match(line)):
            stated = clean(correct.group(1))
            last_content = start + offset
        elif stated is not None and not explanation and line:
            explanation.append(line)
            last_content = start + offset
        elif not is_trailer(line, title, question_texts):
            issues.append(ParseIssue(path.name, lineno, f"ignored unexpected line in question {number}", "ignored"))
    marked = [opt for opt, is_correct in options if is_correct]
    accepted = stated or (marked[0] if marked else None)
    if not accepted:
        issues.append(ParseIssue(path.name, start + 1, f"question {number} has no accepted answer", question=text))
        return None
    if marked and stated and clean(marked[0]).casefold() != stated.casefold():
        issues.append(
            ParseIssue(
                path.name,
                start + 1,
                f"question {number}: the marked option differs from 'Correct answer:'; using the latter",
                "ignored",
            )
        )
    wrong = [opt for opt, _ in options if opt.casefold() != accepted.casefold()]
    return ParsedQuestion(
        number=number,
        text=text,
        accepted_answers=[accepted],
        wrong_options=wrong,
        explanation=clean(" ".join(explanation)) or None,
        line_start=start + 1,
        line_end=last_content + 1,
    )
