"""A chat client on a freshly ingested bank (fake encoder) with an in-process demo runner."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from tests.app.chat.fake_demos import FakeDemoRunner
from tests.conftest import ingest_with
from tests.fakes import FakeEncoder


@pytest.fixture
def runner() -> FakeDemoRunner:
    """The fake demo runner the app uses."""
    return FakeDemoRunner()


@pytest.fixture
def chat(settings: Settings, fake_encoder: FakeEncoder, runner: FakeDemoRunner) -> Iterator[TestClient]:
    """A client of a loaded app whose demos run in-process."""
    ingest_with(settings, fake_encoder)
    app = create_app(settings, lambda _: fake_encoder, load_in_background=False)
    app.state.demo_runner = runner
    with TestClient(app) as client:
        yield client
