"""An API client on a freshly ingested bank (fake encoder), and a session factory on a migrated database,
for each database."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import make_engine, make_sessionmaker, transaction, upgrade
from app.keys.service import create_key
from app.main import create_app
from tests.conftest import ingest_with
from tests.fakes import FakeEncoder


@pytest.fixture
def client(settings: Settings, fake_encoder: FakeEncoder) -> Iterator[TestClient]:
    """A client of an app whose model and index are loaded."""
    ingest_with(settings, fake_encoder)
    app = create_app(settings, lambda _: fake_encoder, load_in_background=False)
    with TestClient(app) as c:
        yield c


@pytest.fixture
def make_key(client: TestClient) -> Callable[..., tuple[str, str]]:
    """Makes an API key in the client's database; returns (key id, secret)."""
    settings = client.app.state.runtime.settings  # type: ignore[attr-defined]

    def make(rate_limit: str | None = None, scopes: tuple[str, ...] = ("grade",)) -> tuple[str, str]:
        engine = make_engine(settings.db_url)
        with transaction(make_sessionmaker(engine)) as s:
            key, secret = create_key(s, name="test", scopes=scopes, rate_limit=rate_limit)
            key_id = key.id
        engine.dispose()
        return key_id, secret

    return make


@pytest.fixture
def factory(settings: Settings) -> Iterator[sessionmaker[Session]]:
    """A session factory on the test's migrated database."""
    engine = make_engine(settings.db_url)
    upgrade(engine)
    yield make_sessionmaker(engine)
    engine.dispose()
