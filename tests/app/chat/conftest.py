"""A chat client on a freshly ingested bank (fake encoder) with an in-process demo runner."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from tests.app.chat.fake_demos import FakeDemoRunner
from tests.conftest import ROOT, ingest_with
from tests.fakes import FakeEncoder


@pytest.fixture
def runner() -> FakeDemoRunner:
    """The fake demo runner the app uses."""
    return FakeDemoRunner()


@pytest.fixture
def chat(settings: Settings, fake_encoder: FakeEncoder, runner: FakeDemoRunner) -> Iterator[TestClient]:
    """A client of a loaded app (the bank and the study notes) whose demos run in-process."""
    shutil.copytree(ROOT / "data" / "notes", settings.notes_path)
    ingest_with(settings, fake_encoder, [settings.raw_path, settings.notes_path])
    app = create_app(settings, lambda _: fake_encoder, load_in_background=False)
    app.state.demo_runner = runner
    with TestClient(app) as client:
        yield client
