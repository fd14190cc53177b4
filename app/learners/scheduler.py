"""FSRS scheduling of reviews: verdicts become ratings, cards are stored as JSON."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fsrs import Card as FsrsCard
from fsrs import Rating, Scheduler

from app.models import as_utc

RATING_FOR_VERDICT = {"correct": Rating.Good, "partial": Rating.Hard, "incorrect": Rating.Again}
_SCHEDULER = Scheduler(desired_retention=0.9, enable_fuzzing=False)


def rating_for(verdict: str) -> Rating:
    """correct -> Good, partial -> Hard, incorrect -> Again."""
    return RATING_FOR_VERDICT[verdict]


def review(state: dict[str, Any] | None, verdict: str, when: datetime) -> tuple[dict[str, Any], datetime, int]:
    """Apply one review to a card (a new card when `state` is None); returns (state, due, rating)."""
    card = FsrsCard.from_dict(state) if state else FsrsCard(card_id=1)  # type: ignore[arg-type]
    rating = rating_for(verdict)
    card, _ = _SCHEDULER.review_card(card, rating, review_datetime=as_utc(when))
    return dict(card.to_dict()), card.due, int(rating)


def retrievability(state: dict[str, Any], when: datetime) -> float:
    """The probability of recall now, as FSRS models it."""
    return float(_SCHEDULER.get_card_retrievability(FsrsCard.from_dict(state), current_datetime=as_utc(when)))  # type: ignore[arg-type]
