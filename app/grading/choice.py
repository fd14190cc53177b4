"""Exact grading of multiple-choice answers: an option letter or an option's own text."""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.grading.rubric import GradingItem
from app.grading.text import normalise_option

_LETTER = re.compile(
    r"^\s*(?:(?:my\s+)?(?:answer|option|choice)(?:\s+is)?\s*[:\-]?\s*)?[(\[]?\s*([a-z])\s*[)\].:]?\s*$",
    re.IGNORECASE,
)
_LETTER_PREFIX = re.compile(r"^\s*[(\[]?([a-z])[)\].:]\s+(.+)$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class ExactMatch:
    """An answer that is exactly one of the known texts."""

    text: str
    correct: bool


def _option_by_letter(letter: str, options: list[str]) -> str | None:
    index = ord(letter.lower()) - ord("a")
    return options[index] if 0 <= index < len(options) else None


def _lookup(text: str, item: GradingItem) -> ExactMatch | None:
    norm = normalise_option(text)
    if not norm:
        return None
    for ref in item.reference_answers:
        if normalise_option(ref) == norm:
            return ExactMatch(ref, True)
    for wrong in item.wrong_answers:
        if normalise_option(wrong) == norm:
            return ExactMatch(wrong, False)
    return None


def exact_match(answer: str, item: GradingItem) -> ExactMatch | None:
    """The option the answer names by letter (when options are shown) or by its exact text."""
    if item.options:
        letter = _LETTER.match(answer)
        if letter:
            option = _option_by_letter(letter.group(1), item.options)
            return _lookup(option, item) if option is not None else None
        prefixed = _LETTER_PREFIX.match(answer)
        if prefixed:
            option = _option_by_letter(prefixed.group(1), item.options)
            if option is not None and normalise_option(option) == normalise_option(prefixed.group(2)):
                return _lookup(option, item)
    return _lookup(answer, item)


def is_bare_letter(answer: str) -> bool:
    """A lone letter ('b', '(c)') that names no option because none were shown."""
    return bool(_LETTER.match(answer))
