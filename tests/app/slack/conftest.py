"""The app with Slack enabled on an ingested bank, its Web API calls going to a fake Slack on loopback."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from tests.app.slack.fake_slack import FakeSlack
from tests.app.slack.slack_requests import SECRET, Slack
from tests.conftest import ROOT, ingest_with
from tests.fakes import FakeEncoder


@pytest.fixture
def fake_slack() -> Iterator[FakeSlack]:
    """A fake Slack Web API server."""
    fake = FakeSlack().start()
    yield fake
    fake.stop()


@pytest.fixture
def slack_settings(settings: Settings, fake_slack: FakeSlack) -> Settings:
    """Single-workspace settings pointing slack_sdk at the fake server."""
    return settings.model_copy(
        update={
            "slack_signing_secret": SECRET,
            "slack_bot_token": "xoxb-test-token",
            "slack_api_url": fake_slack.api_url,
            "slack_quiz_length": 2,
        }
    )


@pytest.fixture
def slack(slack_settings: Settings, fake_encoder: FakeEncoder, fake_slack: FakeSlack) -> Iterator[Slack]:
    """Signed requests to a running app with Slack enabled (the bank and the study notes)."""
    shutil.copytree(ROOT / "data" / "notes", slack_settings.notes_path)
    ingest_with(slack_settings, fake_encoder, [slack_settings.raw_path, slack_settings.notes_path])
    app = create_app(slack_settings, lambda _: fake_encoder, load_in_background=False)
    with TestClient(app) as client:
        yield Slack(client, fake_slack)
