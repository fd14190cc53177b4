"""Document parsers, one per layout, chosen by detecting the layout."""

from __future__ import annotations

from pathlib import Path

from ingest.parsers import accepted_answer, inline_options, structured
from ingest.parsers.base import (
    DocumentError,
    LabelledExample,
    ParsedQuestion,
    ParseIssue,
    ParseResult,
    line_of_offset,
    split_lines,
)

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "DocumentError",
    "LabelledExample",
    "ParseIssue",
    "ParseResult",
    "ParsedQuestion",
    "parse_document",
]

MAX_DOCUMENT_BYTES = 2 * 1024 * 1024
"""Quiz documents are a few KB; anything this large is a mistake, not a bank."""


def _read_text(path: Path, max_bytes: int) -> str:
    size = path.stat().st_size
    if size > max_bytes:
        raise DocumentError(f"file is {size / 1e6:.1f} MB, over the {max_bytes / 1e6:.1f} MB limit for a quiz document")
    data = path.read_bytes()
    if not data.strip():
        raise DocumentError("file is empty")
    # Anywhere in the file, not only its first 8 KB: a NUL that reached the bank failed the whole
    # ingestion on PostgreSQL, which refuses NUL in text.
    if (nul := data.find(b"\x00")) >= 0:
        raise DocumentError("file is binary (it holds a NUL byte), not a text quiz document",
                            line_of_offset(data, nul))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = line_of_offset(data, exc.start)
        raise DocumentError(f"file is not UTF-8 text (bad byte at offset {exc.start})", line) from exc
    # A byte order mark inside the text (files joined with `cat`, a second BOM) is invisible and not
    # whitespace: before a `Question N` heading it hid the heading, and the question's blocks went to the
    # question before it.
    return text.replace("\ufeff", "")


def _parse(path: Path, max_bytes: int) -> ParseResult:
    text = _read_text(path, max_bytes)
    if path.suffix.lower() in structured.SUFFIXES:
        return structured.parse(path, text)
    lines = split_lines(text)
    title = next((line.strip() for line in lines if line.strip()), None)
    if inline_options.detect(lines):
        return inline_options.parse(path, lines, title)
    if accepted_answer.detect(lines):
        return accepted_answer.parse(path, lines, title)
    raise DocumentError(
        "unknown layout: expected 'Question N: text' with '- option' lines, "
        "'Question N' / 'Accepted Answer' / 'Answer' blocks, or a YAML/JSON bank"
    )


def parse_document(path: Path, max_bytes: int = MAX_DOCUMENT_BYTES) -> ParseResult:
    """Parse one document; a document that cannot be used gives a result with one issue."""
    try:
        result = _parse(path, max_bytes)
    except DocumentError as exc:
        return ParseResult(path=path, layout=None, issues=[ParseIssue(path.name, exc.line, exc.reason)])
    except OSError as exc:
        return ParseResult(path=path, layout=None, issues=[ParseIssue(path.name, 0, f"cannot read: {exc}")])
    if not result.questions and not any(i.severity == "skipped" for i in result.issues):
        result.issues.append(ParseIssue(path.name, 0, "no questions found"))
    numbers: dict[int, int] = {}
    for q in result.questions:
        if q.number in numbers:
            result.issues.append(
                ParseIssue(path.name, q.line_start, f"question number {q.number} appears twice", "ignored")
            )
        numbers[q.number] = q.line_start
    return result
