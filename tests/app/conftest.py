"""An API client on a freshly ingested bank (fake encoder), for each database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
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
