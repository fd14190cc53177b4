"""The embedding cache under concurrency: two callers embedding the same new text both succeed."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sqlalchemy import func, select

from app.db import make_engine, make_sessionmaker, transaction, upgrade
from app.models import Embedding
from ingest.vectors import VectorCache
from tests.fakes import FakeEncoder


def test_a_text_embedded_by_two_callers_at_once_is_stored_once(db_url: str) -> None:
    engine = make_engine(db_url)
    upgrade(engine)
    factory = make_sessionmaker(engine)
    first, second = VectorCache(factory, "fake-bow@0"), VectorCache(factory, "fake-bow@0")
    text = "all-gather leaves every rank with every chunk"

    class Racing(FakeEncoder):
        """While the second caller encodes (it found nothing cached), the first stores the same text."""

        def encode(self, texts: Sequence[str]) -> np.ndarray:
            first.ensure([text], FakeEncoder)
            return super().encode(texts)

    assert second.ensure([text], Racing) == 1  # the duplicate row is skipped, not an IntegrityError
    assert np.allclose(second.get_many([text])[text], FakeEncoder().encode([text])[0])
    with transaction(factory) as session:
        assert session.scalar(select(func.count()).select_from(Embedding)) == 1
    engine.dispose()
