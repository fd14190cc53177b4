"""Multi-workspace mode: Bolt's OAuth install stores the installation in the tutor's database and uses it."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from cryptography.fernet import Fernet
from fastapi.testclient import TestClient
from pydantic import SecretStr
from slack_sdk.oauth.installation_store import Installation

from app.config import Settings, get_settings
from app.db import make_engine, make_sessionmaker, upgrade
from app.main import create_app
from app.slack.installations import SqlInstallationStore, SqlStateStore, TokenCipher
from tests.app.slack.fake_slack import TEAM, FakeSlack
from tests.app.slack.slack_requests import SECRET, Slack
from tests.conftest import ingest_with
from tests.fakes import FakeEncoder


@pytest.fixture
def oauth(
    settings: Settings, fake_slack: FakeSlack, fake_encoder: FakeEncoder, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Slack]:
    """The app with OAuth client credentials, a token key and no bot token."""
    key = Fernet.generate_key().decode()
    monkeypatch.setenv("TUTOR_SLACK_TOKEN_KEYS", key)  # the installation store reads the process settings
    get_settings.cache_clear()
    configured = settings.model_copy(
        update={
            "slack_signing_secret": SECRET,
            "slack_client_id": "111.222",
            "slack_client_secret": "client-secret",
            "slack_api_url": fake_slack.api_url,
            "slack_token_keys": SecretStr(key),
        }
    )
    ingest_with(configured, fake_encoder)
    with TestClient(create_app(configured, lambda _: fake_encoder, load_in_background=False)) as client:
        yield Slack(client, fake_slack)
    get_settings.cache_clear()


def test_install_then_commands_use_the_stored_token(oauth: Slack, fake_slack: FakeSlack) -> None:
    page = oauth.client.get("/slack/install")
    assert page.status_code == 200
    state = re.search(r"state=([\w-]+)", page.text)
    assert state is not None
    cookie = page.headers["set-cookie"].split(";")[0]
    done = oauth.client.get(
        f"/slack/oauth_redirect?code=abc&state={state.group(1)}", headers={"Cookie": cookie}, follow_redirects=False
    )
    assert done.status_code == 200, done.text
    assert fake_slack.named("oauth.v2.access")[0].payload["code"] == "abc"

    oauth.command("quiz")
    posted = fake_slack.wait_for("chat.postMessage")[0]
    assert posted.token == "xoxb-installed"
    replayed = oauth.client.get(f"/slack/oauth_redirect?code=abc&state={state.group(1)}", headers={"Cookie": cookie})
    assert replayed.status_code != 200 or "error" in replayed.text.lower()  # a state works once


def test_requests_from_a_workspace_without_install_are_refused(oauth: Slack, fake_slack: FakeSlack) -> None:
    response = oauth.command("quiz")
    assert response.status_code == 200  # Bolt answers the user that the app is not installed here
    assert fake_slack.named("chat.postMessage") == []


def test_installation_store_round_trip(settings: Settings) -> None:
    engine = make_engine(settings.db_url)
    upgrade(engine)
    factory = make_sessionmaker(engine)
    store = SqlInstallationStore("111.222", lambda: factory, TokenCipher([Fernet.generate_key().decode()]))
    store.save(
        Installation(
            app_id="A0TUTOR",
            team_id=TEAM,
            user_id="U0ADA",
            bot_token="xoxb-1",
            bot_id="B1",
            bot_user_id="U0BOT",
            bot_scopes=["chat:write", "commands"],
        )
    )
    bot = store.find_bot(enterprise_id=None, team_id=TEAM)
    assert bot is not None and bot.bot_token == "xoxb-1" and bot.bot_scopes == ["chat:write", "commands"]
    mine = store.find_installation(enterprise_id=None, team_id=TEAM, user_id="U0ADA")
    assert mine is not None and mine.user_id == "U0ADA"
    assert store.find_bot(enterprise_id=None, team_id="T0OTHER") is None
    store.delete_all(enterprise_id=None, team_id=TEAM)
    assert store.find_bot(enterprise_id=None, team_id=TEAM) is None
    states = SqlStateStore(lambda: factory)
    issued = states.issue()
    assert states.consume(issued) and not states.consume(issued) and not states.consume("forged")
    engine.dispose()
