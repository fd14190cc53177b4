"""Inline questions' vectors are bounded: in process memory (an LRU / TTL cache) and in the database (a row cap
and a time to live). A vector pushed out is embedded again when next needed, with the same result.

Every distinct inline question sent to POST /v1/grade used to add its texts' vectors to a dict that never shrank
and to the embeddings table for good: memory and the database grew linearly with client traffic.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import make_engine, make_sessionmaker, transaction, upgrade
from app.keys.service import create_key
from app.main import create_app
from app.models import Embedding, utcnow
from ingest import vectors
from tests.conftest import ingest_with
from tests.fakes import FakeEncoder

MODEL = "fake-bow@0"


@pytest.fixture
def factory(db_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(db_url)
    upgrade(engine)
    yield make_sessionmaker(engine)
    engine.dispose()


def _rows(factory: sessionmaker[Session], model_id: str) -> int:
    with transaction(factory) as s:
        return int(s.scalar(select(func.count()).select_from(Embedding).where(Embedding.model_id == model_id)) or 0)


def test_the_memory_of_a_vector_cache_is_bounded(factory: sessionmaker[Session]) -> None:
    cache = vectors.VectorCache(factory, MODEL, memory=8)
    texts = [f"text number {i} about ring all-reduce" for i in range(40)]
    assert cache.ensure(texts, FakeEncoder) == 40
    assert len(cache) == 8  # the least recently used went; the database keeps every bank vector
    assert _rows(factory, MODEL) == 40
    found = cache.get_many(texts)  # those not in memory are read again
    assert list(found) == texts
    assert np.allclose(np.stack([found[t] for t in texts]), FakeEncoder().encode(texts))
    assert len(cache) == 8


def test_inline_vectors_are_capped_in_memory_and_in_the_database(factory: sessionmaker[Session]) -> None:
    bank = vectors.CachedEncoder(vectors.VectorCache(factory, MODEL), FakeEncoder)
    bank.encode(["a bank question about pipeline bubbles"])
    model = FakeEncoder()
    inline = vectors.CachedEncoder(
        vectors.InlineVectorCache(factory, MODEL, memory=4, max_rows=10, ttl_s=3600, prune_every=1), lambda: model
    )
    assert inline.model_id == MODEL  # rubrics name the model, not where its vectors are kept
    store = inline.cache.store_id
    assert store != MODEL
    texts = [f"inline question {i}: what does reduce-scatter leave on rank {i}?" for i in range(30)]
    for text in texts:
        assert np.allclose(inline.encode([text]), model.encode([text]))
        assert len(inline.cache) <= 4
        assert _rows(factory, store) <= 10
    assert _rows(factory, MODEL) == 1  # the bank's vectors are never pruned

    before = len(model.texts)
    again = inline.encode([texts[0]])  # pushed out of memory and out of the table: embedded again
    assert model.texts[before:] == [texts[0]]
    assert np.allclose(again, model.encode([texts[0]]))
    recent = inline.encode([texts[-1]])  # still stored: read back, not embedded
    assert model.texts[before + 2:] == []
    assert np.allclose(recent, FakeEncoder().encode([texts[-1]]))


def test_inline_rows_expire_after_their_time_to_live(factory: sessionmaker[Session]) -> None:
    model = FakeEncoder()
    cache = vectors.InlineVectorCache(factory, MODEL, memory=4, max_rows=1000, ttl_s=3600, prune_every=1)
    inline = vectors.CachedEncoder(cache, lambda: model)
    inline.encode([f"old inline text {i}" for i in range(5)])
    assert _rows(factory, cache.store_id) == 5
    with transaction(factory) as s:
        s.execute(update(Embedding).where(Embedding.model_id == cache.store_id)
                  .values(created_at=utcnow() - timedelta(hours=2)))
    inline.encode(["a new inline text"])  # a write prunes what has expired
    assert _rows(factory, cache.store_id) == 1


def test_a_bank_text_sent_inline_is_read_from_the_bank(factory: sessionmaker[Session]) -> None:
    text = "Every rank ends with the concatenation of all ranks' chunks"
    vectors.CachedEncoder(vectors.VectorCache(factory, MODEL), FakeEncoder).encode([text])
    model = FakeEncoder()
    cache = vectors.InlineVectorCache(factory, MODEL, prune_every=1)
    assert np.allclose(vectors.CachedEncoder(cache, lambda: model).encode([text]), FakeEncoder().encode([text]))
    assert model.texts == [] and _rows(factory, cache.store_id) == 0


@pytest.fixture
def client(settings: Settings, fake_encoder: FakeEncoder, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    monkeypatch.setattr(vectors, "INLINE_MEMORY_ENTRIES", 16, raising=False)
    monkeypatch.setattr(vectors, "INLINE_MAX_ROWS", 24, raising=False)
    monkeypatch.setattr(vectors, "INLINE_PRUNE_EVERY", 1, raising=False)
    ingest_with(settings, fake_encoder)
    app = create_app(settings, lambda _: fake_encoder, load_in_background=False)
    with TestClient(app) as c:
        yield c


def test_many_distinct_inline_questions_keep_memory_and_rows_bounded(client: TestClient) -> None:
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    with transaction(runtime.factory) as s:
        _, secret = create_key(s, name="test", scopes=("grade",), rate_limit="100000/minute")
    headers = {"X-API-Key": secret}
    _, _, book = runtime.grading()
    bank_rows = _rows(runtime.factory, MODEL)

    def grade(i: int) -> dict[str, object]:
        res = client.post("/v1/grade", headers=headers, json={
            "question": f"Question {i}: what does all-gather leave on rank {i}?",
            "reference_answers": [f"rank {i} ends with every chunk {i}"],
            "wrong_answers": [f"rank {i} gets the sum {i}"],
            "answer": f"every chunk {i}",
        })
        assert res.status_code == 200, res.text
        return dict(res.json())

    first = grade(0)
    for i in range(1, 60):
        grade(i)
    with transaction(runtime.factory) as s:
        rows = int(s.scalar(select(func.count()).select_from(Embedding)) or 0)
    assert rows - bank_rows <= 24  # without a bound: 60 questions x 3 texts or more
    assert _rows(runtime.factory, MODEL) == bank_rows
    assert len(book.encoder.inline().cache) <= 16
    again = grade(0)  # its vectors were pushed out: embedded again, graded the same
    del again["attempt_id"], first["attempt_id"]
    assert again == first


def test_the_inline_store_id_fits_the_model_id_column() -> None:
    assert vectors.inline_store_id(MODEL) == MODEL + "#inline"
    long_id = "a/very/long/local/path/to/a/sentence-encoder/" * 4 + "@0123456789ab"
    assert len(vectors.inline_store_id(long_id)) <= 128
    assert vectors.inline_store_id(long_id) != vectors.inline_store_id(long_id + "x")
