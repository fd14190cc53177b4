"""Exact grading of multiple-choice answers: an option letter or an option's own text."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from app.grading.rubric import GradingItem
from app.grading.text import NEGATIONS, content_stems, normalise_option, raw_tokens

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


# An option that is a name with its short form after it: "torch.nn.parallel.DistributedDataParallel (DDP)",
# "UCX (Unified Communication X)". Either form alone names the option, as does a dotted name's last part.
_NAMED = re.compile(r"^\s*(?P<name>[^()]+?)\s*\((?P<alias>[^()]+)\)\s*$")
NAME_WORDS = 5  # at most this many words in the name, and in its short form: longer options are claims
ALIAS_WORDS = 4


@lru_cache(maxsize=4096)
def option_names(option: str) -> frozenset[str]:
    """The normalised texts that name an option exactly: its own, and for a short name with its short form
    in brackets after it, the name, the short form and a dotted name's last part."""
    names = {normalise_option(option)}
    named = _NAMED.match(option)
    if named is not None:
        name, alias = named["name"], named["alias"]
        if len(name.split()) <= NAME_WORDS and len(alias.split()) <= ALIAS_WORDS:
            names |= {normalise_option(name), normalise_option(alias)}
            if "." in name and " " not in name.strip():
                names.add(normalise_option(name.rsplit(".", 1)[-1]))
    return frozenset(names - {""})


def _names(text: str, option: str) -> bool:
    """Whether the text names the option: one of its names, or a name and a short form in brackets that
    are both its names ("DDP (DistributedDataParallel)")."""
    names = option_names(option)
    if normalise_option(text) in names:
        return True
    named = _NAMED.match(text)
    return named is not None and {normalise_option(named["name"]), normalise_option(named["alias"])} <= names


SHORT_OPTION_WORDS = 8  # an option of at most this many words names things; a longer one makes a claim


def _same_terms(text: str, option: str, question: str) -> bool:
    """Whether the text names what a short option names, without what the question already says: every
    content word of the option that the question does not hold, in the option's order, no content word
    that neither holds, and no negation ("tensor parallelism" for "Tensor parallelism for inference", asked
    of "a multi-GPU inference deployment"). The order keeps a swap of two terms ("DP splits the model, MP
    the data") from naming the option it reverses; a longer option is a claim, and is not read this way."""
    if len(option.split()) > SHORT_OPTION_WORDS or any(t in NEGATIONS for t in raw_tokens(text)):
        return False
    asked, own = set(content_stems(question)), content_stems(option)
    needed = [s for s in dict.fromkeys(own) if s not in asked]
    said = list(dict.fromkeys(content_stems(text)))
    return (bool(needed) and [s for s in said if s in needed] == needed
            and all(s in asked or s in own for s in said))


def _lookup(text: str, item: GradingItem) -> ExactMatch | None:
    """The option the text names: by a name first, among the accepted answers and then the wrong ones (an
    exact name beats a term match on another option), then by a short option's terms the same way."""
    if not normalise_option(text):
        return None
    matchers = (lambda option: _names(text, option), lambda option: _same_terms(text, option, item.question))
    for matches in matchers:
        for options, correct in ((item.reference_answers, True), (item.wrong_answers, False)):
            for option in options:
                if matches(option):
                    return ExactMatch(option, correct)
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
