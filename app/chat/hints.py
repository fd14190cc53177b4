"""Hints drawn from a question's own material that never state its answer."""

from __future__ import annotations

import re

from app.bank.views import options_of
from app.models import Question

_WORD = re.compile(r"[A-Za-z0-9][\w'-]*")
_COMMON_WORDS = (
    "the a an of to in and or for on by with is are be as at it its that this from into each all per than "
    "which when so not can more less their they them one two"
)
_COMMON = frozenset(_COMMON_WORDS.split())
MIN_KEPT = 0.4  # a cloze that hides more than this share of the words says nothing


def _key_words(answer: str) -> set[str]:
    """The answer's content words (lower case), the words a hint must not reveal."""
    return {w.casefold() for w in _WORD.findall(answer) if w.casefold() not in _COMMON and len(w) > 2}


def cloze(text: str, answer: str) -> str | None:
    """The text with the answer's content words blanked out, or None when too little would remain."""
    keys = _key_words(answer)
    words = _WORD.findall(text)
    if not words or not keys:
        return None
    hidden = sum(w.casefold() in keys for w in words)
    if hidden == 0 or 1 - hidden / len(words) < MIN_KEPT:
        return None
    return _WORD.sub(lambda m: "____" if m.group(0).casefold() in keys else m.group(0), text)


def _initials(answer: str) -> str | None:
    keys = [w for w in _WORD.findall(answer) if w.casefold() in _key_words(answer)]
    if len(keys) < 2:
        return None
    shown = ", ".join(f"“{w[0]}…”" for w in keys[:4])
    return f"The answer uses {len(keys)} key words; the first ones start with {shown}."


def hints_for(question: Question, *, with_options: bool) -> list[str]:
    """Hints from weakest to strongest: the explanation as a cloze, then options ruled out or initials."""
    answer = question.accepted_answers[0]
    hints: list[str] = []
    if question.explanation and (gap := cloze(question.explanation, answer)):
        hints.append(f"From the material: “{gap}”")
    if with_options:
        options = options_of(question)
        wrong = [o for o in options if o["text"] != answer]
        for option in wrong[: max(0, len(options) - 2)]:
            hints.append(f"It is not {option['key']} ({option['text']}).")
    elif initials := _initials(answer):
        hints.append(initials)
    if not hints:
        hints.append(f"The answer is {len(_WORD.findall(answer))} words long and is about what the question names.")
    return hints


def reveals(hint: str, answer: str) -> bool:
    """True if a hint contains the answer's text (used by tests and as a last guard)."""
    return answer.casefold().strip(" .") in hint.casefold()
