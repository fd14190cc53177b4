"""Layouts 2 and 3: `Question N` / `Accepted Answer` / `Answer` blocks separated by blank lines.

Layout 2 (`qa-explanation`) has one `Answer` block per question: the explanation.
Layout 3 (`qa-distractors`) has several: the wrong options, and no explanation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
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

EXPLANATION_LAYOUT = "qa-explanation"
DISTRACTOR_LAYOUT = "qa-distractors"

_QUESTION = re.compile(r"^Question\s+(\d+)\s*$", re.IGNORECASE)
# `(?:\s*:)?\s*`, not `\s*:?\s*`: two runs of spaces around an optional colon split a long run of spaces in
# every way before failing (quadratic; "Answer", 20 000 spaces and a word took 2 s).
_ACCEPTED = re.compile(r"^Accepted\s+Answers?(?:\s*:)?\s*$", re.IGNORECASE)
_ANSWER = re.compile(r"^Answer(?:\s*:)?\s*$", re.IGNORECASE)


@dataclass
class _Paragraph:
    line: int  # 1-based first line
    end: int
    text: str


@dataclass
class _Block:
    digits: str  # the number as written
    number: int | None  # None: over the bank's limit
    line: int
    text: _Paragraph | None = None
    accepted: list[_Paragraph] = field(default_factory=list)
    answers: list[_Paragraph] = field(default_factory=list)
    extra: list[_Paragraph] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The question's number for messages."""
        return str(self.number) if self.number is not None else f"{self.digits[:12]}..."


def detect(lines: list[str]) -> bool:
    """True when the document has bare `Question N` headings and `Accepted Answer` headings."""
    stripped = [line.strip() for line in lines]
    return any(_QUESTION.match(s) for s in stripped) and any(_ACCEPTED.match(s) for s in stripped)


def _paragraphs(lines: list[str]) -> list[_Paragraph]:
    """Split on blank lines; headings always stand alone even without blank lines around them."""
    out: list[_Paragraph] = []
    buf: list[str] = []
    start = 0

    def flush(end: int) -> None:
        if buf:
            out.append(_Paragraph(start + 1, end, clean(" ".join(buf))))
            buf.clear()

    for idx, raw in enumerate(lines):
        line = raw.strip()
        if not line:
            flush(idx)
            continue
        if _QUESTION.match(line) or _ACCEPTED.match(line) or _ANSWER.match(line):
            flush(idx)
            out.append(_Paragraph(idx + 1, idx + 1, line))
            continue
        if not buf:
            start = idx
        buf.append(line)
    flush(len(lines))
    return out


def _blocks(paragraphs: list[_Paragraph]) -> tuple[list[_Block], list[_Paragraph]]:
    """Group paragraphs under their question; return the blocks and anything before the first."""
    blocks: list[_Block] = []
    preamble: list[_Paragraph] = []
    slot: str | None = None
    for para in paragraphs:
        if m := _QUESTION.match(para.text):
            blocks.append(_Block(digits=m.group(1), number=question_number(m.group(1)), line=para.line))
            slot = "text"
        elif not blocks:
            preamble.append(para)
        elif _ACCEPTED.match(para.text):
            slot = "accepted"
        elif _ANSWER.match(para.text):
            slot = "answer"
        else:
            block = blocks[-1]
            if slot == "text" and block.text is None:
                block.text = para
            elif slot == "accepted" and not block.accepted:
                block.accepted.append(para)
            elif slot == "answer":
                block.answers.append(para)
                slot = None  # one paragraph per Answer heading; the rest is trailer
            else:
                block.extra.append(para)
    return blocks, preamble


def parse(path: Path, lines: list[str], title: str | None) -> ParseResult:
    """Parse a layout-2 or layout-3 document, choosing the variant from its Answer blocks."""
    blocks, preamble = _blocks(_paragraphs(lines))
    distractors = any(len(b.answers) >= 2 for b in blocks)
    layout = DISTRACTOR_LAYOUT if distractors else EXPLANATION_LAYOUT
    result = ParseResult(path=path, layout=layout, title=title)
    question_texts = {b.text.text for b in blocks if b.text}
    for para in preamble:
        if not is_trailer(para.text, title, question_texts):
            result.issues.append(ParseIssue(path.name, para.line, "ignored text before the first question", "ignored"))
    for block in blocks:
        for para in block.extra:
            if not is_trailer(para.text, title, question_texts):
                result.issues.append(
                    ParseIssue(path.name, para.line, f"ignored unexpected text in question {block.name}",
                               "ignored")
                )
        question = _to_question(path, block, distractors, result.issues)
        if question is not None:
            result.questions.append(question)
    return result


def _to_question(path: Path, block: _Block, distractors: bool, issues: list[ParseIssue]) -> ParsedQuestion | None:
    if block.text is None:
        issues.append(ParseIssue(path.name, block.line, f"question {block.name} has no question text"))
        return None
    if block.number is None:
        issues.append(number_too_large(path.name, block.line, block.digits, block.text.text))
        return None
    if not block.accepted:
        issues.append(
            ParseIssue(
                path.name, block.line, f"question {block.number} has no accepted answer", question=block.text.text
            )
        )
        return None
    answers = [p.text for p in block.answers]
    last = max(p.end for p in [block.text, *block.accepted, *block.answers])
    return ParsedQuestion(
        number=block.number,
        text=block.text.text,
        accepted_answers=[p.text for p in block.accepted],
        wrong_options=answers if distractors else [],
        explanation=None if distractors else (answers[0] if answers else None),
        line_start=block.line,
        line_end=last,
    )
