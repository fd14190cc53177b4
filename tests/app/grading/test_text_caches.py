"""The grader's text caches are bounded by the characters they hold, whatever answers arrive."""

from __future__ import annotations

import random
import string

from app.grading import text


def _answer(rng: random.Random, chars: int = 2000) -> str:
    words = ("".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(chars))
    return " ".join(words)[:chars]


def test_long_distinct_answers_stay_within_the_character_budget() -> None:
    rng = random.Random(7)
    for _ in range(3 * text.TEXT_CACHE_CHARS // 4000):  # three budgets' worth of 2,000-character answers
        answer = _answer(rng)
        text.content_stems(answer)
        text.normalise_option(answer)
    for fn in (text.fold, text._tokens, text._content_stems, text.normalise_option):
        cache = fn.cache  # type: ignore[attr-defined]
        assert cache.currsize <= cache.maxsize == text.TEXT_CACHE_CHARS, fn.__name__


def test_a_cached_text_gives_what_the_function_gives() -> None:
    sample = "Ring all-reduce sends 2(N-1)/N of the data; NCCL picks rings or trees."
    assert text.content_stems(sample) == text.content_stems(sample)
    assert text.fold.__wrapped__(sample) == text.fold(sample)  # type: ignore[attr-defined]
    assert text.fold(sample) == text.fold(sample)


def test_a_text_larger_than_the_budget_is_computed_not_stored() -> None:
    huge = "x " * text.TEXT_CACHE_CHARS
    before = text.fold.cache.currsize  # type: ignore[attr-defined]
    assert text.fold(huge).strip().startswith("x")
    assert text.fold.cache.currsize <= max(before, text.TEXT_CACHE_CHARS)  # type: ignore[attr-defined]
    assert (huge,) not in text.fold.cache  # type: ignore[attr-defined]


def test_long_words_are_not_remembered() -> None:
    word = "a" * 500
    size = text.stem.cache_info().currsize  # type: ignore[attr-defined]
    assert text.stem(word) == text.stem(word)
    assert text.stem.cache_info().currsize == size  # type: ignore[attr-defined]
