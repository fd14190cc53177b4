"""Shared types for the document parsers: parsed questions, issues and results."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ingest.cleaning import clean


@dataclass(frozen=True)
class LabelledExample:
    """An author-supplied example answer with its verdict label."""

    answer: str
    label: str


@dataclass
class ParsedQuestion:
    """One question as read from a document, before it becomes a bank row."""

    number: int
    text: str
    accepted_answers: list[str]
    wrong_options: list[str] = field(default_factory=list)
    explanation: str | None = None
    line_start: int = 0
    line_end: int = 0
    topics: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    examples: list[LabelledExample] = field(default_factory=list)


@dataclass(frozen=True)
class ParseIssue:
    """Something in a document that was skipped or ignored, with where and why."""

    file: str
    line: int
    reason: str
    severity: str = "skipped"  # "skipped" (content lost for this run) or "ignored" (noise)
    question: str | None = None  # the skipped question's text, so its previous version is kept

    def as_dict(self) -> dict[str, object]:
        """The JSON shape used by `tutor ingest --json`."""
        return {"file": self.file, "line": self.line, "reason": self.reason}


@dataclass
class ParseResult:
    """The questions of one document, its layout and what was skipped."""

    path: Path
    layout: str | None
    title: str | None = None
    questions: list[ParsedQuestion] = field(default_factory=list)
    issues: list[ParseIssue] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the document was recognised (it may still have skipped questions)."""
        return self.layout is not None


MAX_QUESTION_NUMBER = 2**31 - 1
"""The largest question number the bank stores (its Integer column on PostgreSQL)."""

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(text: str) -> list[str]:
    """The lines of a document as an editor shows them: broken at \\n, \\r\\n and \\r only.

    str.splitlines() also breaks at form feeds, NEL, LS, PS and the ASCII separators, so one stray such
    character moved every later line number (in issues and in stored line spans) away from the file's.
    """
    lines = _LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def line_of_offset(data: bytes | str, offset: int) -> int:
    """The 1-based line (as `split_lines` counts them) of an offset in bytes or in text."""
    if isinstance(data, bytes):
        return len(re.findall(rb"\r\n|\r|\n", data[:offset])) + 1
    return len(_LINE_BREAK.findall(data, 0, offset)) + 1


def question_number(digits: str) -> int | None:
    """A question's number as written, or None when it is beyond what the bank stores (a 5000-digit
    number is not even read: Python's int() refuses it)."""
    significant = digits.lstrip("0") or "0"
    if len(significant) > len(str(MAX_QUESTION_NUMBER)):
        return None
    number = int(significant)
    return number if number <= MAX_QUESTION_NUMBER else None


def number_too_large(file: str, line: int, digits: str, question: str | None) -> ParseIssue:
    """The issue for a question whose number the bank cannot store (its text is kept, so is its previous version)."""
    shown = digits if len(digits) <= 20 else f"{digits[:12]}... ({len(digits)} digits)"
    return ParseIssue(file, line, f"question number {shown} is over the limit of {MAX_QUESTION_NUMBER}",
                      question=question)


def unstorable(text: str) -> str | None:
    """Why text cannot be stored or hashed (a NUL: PostgreSQL refuses it; a lone surrogate: not UTF-8), or None."""
    if "\x00" in text:
        return "a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "a lone surrogate (not Unicode text)"
    return None


class DocumentError(Exception):
    """A whole document cannot be used; the message says why."""

    def __init__(self, reason: str, line: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


_TRAILER = re.compile(r"^(test yourself|\(?nca\)?.*practice test.*)$", re.IGNORECASE)


def is_trailer(line: str, title: str | None, question_texts: set[str]) -> bool:
    """Lines that decorate quiz pages: repeated titles, 'Test yourself', echoed questions."""
    text = clean(line)
    if not text:
        return True
    if title:
        # Pages repeat the title, sometimes shortened ("... Scaling 3" under "... Scaling 3 — Q&A").
        folded, head = text.casefold(), clean(title).casefold()
        if folded == head or (len(folded) >= 10 and head.startswith(folded)):
            return True
    if text in question_texts:
        return True
    return bool(_TRAILER.match(text))
