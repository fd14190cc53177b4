"""The authoring format: a YAML (or JSON) bank that people write by hand.

title: My bank
questions:
  - question: What does reduce-scatter do?
    accepted_answers: [Reduces, then leaves each rank one disjoint chunk of the result]
    wrong_options: [Sends the full sum to every rank]
    explanation: ...
    topics: [collectives]
    notes: [...]
    examples: [{answer: "each rank gets a reduced shard", label: correct}]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from yaml.reader import ReaderError

from ingest.parsers.base import (
    MAX_QUESTION_NUMBER,
    DocumentError,
    LabelledExample,
    ParsedQuestion,
    ParseIssue,
    ParseResult,
    clean,
    line_of_offset,
    unstorable,
)

LAYOUT = "structured"
SUFFIXES = {".yaml", ".yml", ".json"}


class _Example(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: str = Field(min_length=1)
    label: Literal["correct", "partial", "incorrect"]


class _Question(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str = Field(min_length=1)
    accepted_answers: list[str] = Field(min_length=1)
    wrong_options: list[str] = []
    explanation: str | None = None
    topics: list[str] = []
    notes: list[str] = []
    examples: list[_Example] = []
    number: int | None = Field(default=None, ge=0, le=MAX_QUESTION_NUMBER)

    @field_validator("accepted_answers", "wrong_options", "topics", "notes", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


def _question_lines(text: str) -> list[tuple[int, int]]:
    """The (first, last) 1-based line of each item under `questions`, from YAML node marks.

    A key given twice counts once, its last time, as the loader keeps the last value."""
    root = yaml.compose(text)
    if not isinstance(root, yaml.MappingNode):
        return []
    spans: list[tuple[int, int]] = []
    for key, value in root.value:
        if getattr(key, "value", None) == "questions":
            spans = ([(item.start_mark.line + 1, item.end_mark.line + 1) for item in value.value]
                     if isinstance(value, yaml.SequenceNode) else [])
    return spans


def parse(path: Path, text: str) -> ParseResult:
    """Parse an authoring-format document; invalid questions are reported, not dropped silently."""
    try:
        data = yaml.safe_load(text)
        spans = _question_lines(text)
    except ReaderError as exc:  # a control character: PyYAML reads none
        raise DocumentError(f"not valid YAML/JSON: character #x{exc.character:04x} is not allowed",
                            line_of_offset(text, exc.position)) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise DocumentError(f"not valid YAML/JSON: {exc}", (mark.line + 1) if mark else 0) from exc
    except RecursionError as exc:
        raise DocumentError("not valid YAML/JSON: nested too deeply") from exc
    except ValueError as exc:
        # A value that looks like a date, time or integer but is none (2020-02-30, or an integer
        # beyond Python's int() digit limit): PyYAML raises ValueError, not a YAML error.
        raise DocumentError(f"not valid YAML/JSON: a value cannot be read ({str(exc)[:120]})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise DocumentError("a structured bank needs a top-level 'questions' list")
    title = data.get("title")
    result = ParseResult(path=path, layout=LAYOUT, title=str(title) if title else None)
    for idx, raw in enumerate(data["questions"]):
        first, last = spans[idx] if idx < len(spans) else (0, 0)
        try:
            item = _Question.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'item'}: {err['msg']}" for err in exc.errors()
            )
            named = raw.get("question") if isinstance(raw, dict) else None
            result.issues.append(
                ParseIssue(
                    path.name,
                    first,
                    f"question {idx + 1} is invalid: {problems}",
                    question=named if isinstance(named, str) and not unstorable(named) else None,
                )
            )
            continue
        texts = [item.question, *item.accepted_answers, *item.wrong_options, item.explanation or "", *item.topics,
                 *item.notes, *(e.answer for e in item.examples)]
        if bad := next((why for t in texts if (why := unstorable(t))), None):
            result.issues.append(
                ParseIssue(path.name, first, f"question {idx + 1} holds {bad}",
                           question=None if unstorable(item.question) else item.question)
            )
            continue
        accepted = [clean(a) for a in item.accepted_answers if clean(a)]
        if not accepted:
            result.issues.append(
                ParseIssue(path.name, first, f"question {idx + 1} has no accepted answer", question=item.question)
            )
            continue
        result.questions.append(
            ParsedQuestion(
                number=item.number or idx + 1,
                text=clean(item.question),
                accepted_answers=accepted,
                wrong_options=[clean(w) for w in item.wrong_options if clean(w)],
                explanation=clean(item.explanation) if item.explanation else None,
                line_start=first,
                line_end=max(first, last - 1),
                topics=item.topics,
                notes=[clean(n) for n in item.notes],
                examples=[LabelledExample(clean(e.answer), e.label) for e in item.examples],
            )
        )
    return result
