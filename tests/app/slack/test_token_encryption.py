"""Slack tokens at rest: encrypted with TUTOR_SLACK_TOKEN_KEYS (Fernet), readable across a key rotation,
plain-text rows from before encryption still served and encrypted by `tutor slack rotate-key`."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cryptography.fernet import Fernet
from fastapi.testclient import TestClient
from pydantic import SecretStr
from slack_sdk.oauth.installation_store import Installation
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings, get_settings
from app.db import make_engine, make_sessionmaker, transaction, upgrade
from app.main import create_app
from app.models import SlackInstallation, utcnow
from app.slack.installations import SqlInstallationStore
from tests.app.slack.fake_slack import TEAM, FakeSlack
from tests.app.slack.slack_requests import SECRET, Slack
from tests.conftest import Tutor, ingest_with
from tests.fakes import FakeEncoder

CLIENT = "111.222"
SECRETS = {
    "bot_token": "xoxb-1-very-secret-bot",
    "user_token": "xoxp-2-very-secret-user",
    "bot_refresh_token": "xoxe-1-very-secret-bot-refresh",
    "user_refresh_token": "xoxe-1-very-secret-user-refresh",
    "incoming_webhook_url": "https://hooks.slack.com/services/T0TEAM/B0HOOK/very-secret-hook",
}
KEY_A, KEY_B = Fernet.generate_key().decode(), Fernet.generate_key().decode()
Keys = Callable[..., None]


def installation(team: str = TEAM, user: str = "U0ADA", **overrides: Any) -> Installation:
    """An OAuth installation carrying every kind of secret Slack hands out."""
    fields: dict[str, Any] = {
        "app_id": "A0TUTOR",
        "team_id": team,
        "user_id": user,
        "bot_id": "B1",
        "bot_user_id": "U0BOT",
        "bot_scopes": ["chat:write", "commands"],
        "bot_token_expires_in": 43200,
        "user_scopes": ["search:read"],
        "incoming_webhook_channel_id": "C0QUIZ",
        **SECRETS,
        **overrides,
    }
    return Installation(**fields)


@pytest.fixture
def keys(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Keys]:
    """Set TUTOR_SLACK_TOKEN_KEYS (newest first) for the process settings; no argument unsets it.

    The process settings (which the store reads its keys from) also point at the test's data folder and
    database, so a command run after them never falls back to the default database."""

    def use(*values: str) -> None:
        monkeypatch.setenv("TUTOR_DATA_DIR", str(settings.data_dir))
        monkeypatch.setenv("TUTOR_DATABASE_URL", settings.db_url)
        if values:
            monkeypatch.setenv("TUTOR_SLACK_TOKEN_KEYS", ",".join(values))
        else:
            monkeypatch.delenv("TUTOR_SLACK_TOKEN_KEYS", raising=False)
        get_settings.cache_clear()

    use()
    yield use
    get_settings.cache_clear()


@pytest.fixture
def db(settings: Settings) -> Iterator[tuple[Engine, sessionmaker[Session]]]:
    """The test database at the newest schema."""
    engine = make_engine(settings.db_url)
    upgrade(engine)
    yield engine, make_sessionmaker(engine)
    engine.dispose()


def raw_rows(engine: Engine) -> dict[str, str]:
    """Each stored installation's `data` exactly as the database holds it, as text."""
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT key, data FROM slack_installations")).all()
    return {key: data if isinstance(data, str) else json.dumps(data) for key, data in rows}


def assert_no_secret(texts: list[str], *extra: str) -> None:
    for blob in texts:
        for secret in [*SECRETS.values(), *extra]:
            assert secret not in blob
        assert "xoxb-" not in blob and "xoxp-" not in blob and "xoxe-" not in blob


def store(factory: sessionmaker[Session]) -> SqlInstallationStore:
    return SqlInstallationStore(CLIENT, lambda: factory)


def test_the_database_never_holds_a_token(db: tuple[Engine, sessionmaker[Session]], keys: Keys) -> None:
    engine, factory = db
    keys(KEY_A)
    store(factory).save(installation())
    rows = raw_rows(engine)
    assert len(rows) == 2  # the user's installation and the workspace's latest
    assert_no_secret(list(rows.values()), KEY_A)
    assert all('"team_id": "T0TEAM"' in blob or '"team_id":"T0TEAM"' in blob for blob in rows.values())


def test_round_trip_through_the_store(db: tuple[Engine, sessionmaker[Session]], keys: Keys) -> None:
    _, factory = db
    keys(KEY_A)
    saved = store(factory)
    saved.save(installation())
    found = store(factory).find_installation(enterprise_id=None, team_id=TEAM)
    assert found is not None
    for name, value in SECRETS.items():
        assert getattr(found, name) == value
    assert found.bot_scopes == ["chat:write", "commands"] and found.user_id == "U0ADA"
    mine = saved.find_installation(enterprise_id=None, team_id=TEAM, user_id="U0ADA")
    assert mine is not None and mine.user_token == SECRETS["user_token"]
    bot = saved.find_bot(enterprise_id=None, team_id=TEAM)
    assert bot is not None and bot.bot_token == SECRETS["bot_token"]
    assert bot.bot_refresh_token == SECRETS["bot_refresh_token"]
    assert saved.find_bot(enterprise_id=None, team_id="T0OTHER") is None


def test_old_key_rotation_then_only_the_new_key(
    tutor: Tutor, settings: Settings, keys: Keys, db: tuple[Engine, sessionmaker[Session]]
) -> None:
    engine, factory = db
    keys(KEY_A)
    store(factory).save(installation())
    keys(KEY_B, KEY_A)  # the new key first; the old one still decrypts
    assert store(factory).find_bot(enterprise_id=None, team_id=TEAM) is not None
    first = tutor("slack", "rotate-key").output
    assert "re-encrypted 2" in first and "encrypted 0 plain-text" in first, first
    rotated = raw_rows(engine)
    again = tutor("slack", "rotate-key").output  # idempotent: nothing left to do, nothing rewritten
    assert "re-encrypted 0" in again and "already current 2" in again, again
    assert raw_rows(engine) == rotated
    keys(KEY_B)  # the old key retired
    bot = store(factory).find_bot(enterprise_id=None, team_id=TEAM)
    assert bot is not None and bot.bot_token == SECRETS["bot_token"]
    mine = store(factory).find_installation(enterprise_id=None, team_id=TEAM, user_id="U0ADA")
    assert mine is not None and mine.user_refresh_token == SECRETS["user_refresh_token"]
    assert_no_secret([first, again, *rotated.values()], KEY_A, KEY_B)


def write_plain_text_rows(factory: sessionmaker[Session]) -> None:
    """Rows exactly as the store wrote them before tokens were encrypted."""
    data = installation().to_dict_for_copying()
    data = {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in data.items()}
    data["bot_scopes"], data["user_scopes"] = "chat:write,commands", "search:read"
    with transaction(factory) as session:
        for user in ("U0ADA", None):
            key = f"{CLIENT}::{TEAM}:{user or ''}"
            session.add(
                SlackInstallation(
                    key=key, client_id=CLIENT, team_id=TEAM, user_id=user, data=data, installed_at=utcnow()
                )
            )


def test_an_existing_database_with_plain_text_rows_is_upgraded_served_and_encrypted_by_rotation(
    tutor: Tutor, settings: Settings, keys: Keys
) -> None:
    from alembic import command

    from app.db import _alembic_config

    engine = make_engine(settings.db_url)
    cfg = _alembic_config(settings.db_url)
    with engine.begin() as conn:  # a database from the release that added Slack
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0004")
    factory = make_sessionmaker(engine)
    write_plain_text_rows(factory)
    keys(KEY_A)
    assert "up to date" in tutor("db", "upgrade").output
    bot = store(factory).find_bot(enterprise_id=None, team_id=TEAM)  # still served before rotation
    assert bot is not None and bot.bot_token == SECRETS["bot_token"]
    report = tutor("slack", "rotate-key").output
    assert "encrypted 2 plain-text" in report and "re-encrypted 0" in report, report
    assert_no_secret(list(raw_rows(engine).values()), KEY_A)
    found = store(factory).find_installation(enterprise_id=None, team_id=TEAM, user_id="U0ADA")
    assert found is not None and [getattr(found, n) for n in SECRETS] == list(SECRETS.values())
    engine.dispose()


def test_a_token_no_key_decrypts_is_a_logged_error_for_that_workspace_only(
    db: tuple[Engine, sessionmaker[Session]], keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    _, factory = db
    keys(KEY_A)
    store(factory).save(installation())
    keys(KEY_B)
    store(factory).save(installation(team="T0OTHER", bot_token="xoxb-2-other"))
    with caplog.at_level(logging.WARNING):
        assert store(factory).find_bot(enterprise_id=None, team_id=TEAM) is None
        assert store(factory).find_installation(enterprise_id=None, team_id=TEAM) is None
    other = store(factory).find_bot(enterprise_id=None, team_id="T0OTHER")
    assert other is not None and other.bot_token == "xoxb-2-other"
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors and TEAM in errors[0].getMessage() and "TUTOR_SLACK_TOKEN_KEYS" in errors[0].getMessage()
    assert_no_secret([caplog.text], KEY_A, KEY_B)


def test_a_ciphertext_copied_to_another_workspace_does_not_decrypt(
    db: tuple[Engine, sessionmaker[Session]], keys: Keys
) -> None:
    engine, factory = db
    keys(KEY_A)
    store(factory).save(installation())
    store(factory).save(installation(team="T0OTHER", bot_token="xoxb-2-other"))
    with engine.begin() as conn:  # someone with write access to the database copies one row's data over another's
        conn.execute(
            text(
                "UPDATE slack_installations SET data = (SELECT s.data FROM slack_installations s WHERE s.key = :src)"
                " WHERE key = :dst"
            ),
            {"src": f"{CLIENT}::{TEAM}:", "dst": f"{CLIENT}::T0OTHER:"},
        )
    assert store(factory).find_bot(enterprise_id=None, team_id="T0OTHER") is None


def test_rotation_stops_at_an_unreadable_row_unless_told_to_drop_it(
    tutor: Tutor, keys: Keys, db: tuple[Engine, sessionmaker[Session]]
) -> None:
    engine, factory = db
    keys(KEY_A)
    store(factory).save(installation())
    keys(KEY_B)  # KEY_A is lost
    store(factory).save(installation(team="T0OTHER", user="U0BOB", bot_token="xoxb-2-other"))
    before = raw_rows(engine)
    refused = tutor("slack", "rotate-key", code=1).output
    assert f"{CLIENT}::{TEAM}:" in refused and "TUTOR_SLACK_TOKEN_KEYS" in refused, refused
    assert raw_rows(engine) == before  # one transaction: nothing changed
    dropped = tutor("slack", "rotate-key", "--drop-unreadable").output
    assert "dropped 2 unreadable" in dropped and "already current 2" in dropped, dropped
    assert store(factory).find_bot(enterprise_id=None, team_id=TEAM) is None
    assert store(factory).find_bot(enterprise_id=None, team_id="T0OTHER") is not None
    assert_no_secret([refused, dropped], KEY_A, KEY_B, "xoxb-2-other")


def test_a_malformed_key_is_refused_without_echoing_it(
    db: tuple[Engine, sessionmaker[Session]], keys: Keys, tutor: Tutor
) -> None:
    _, factory = db
    keys(KEY_A, "not-a-fernet-key-but-still-secret")
    with pytest.raises(Exception, match="TUTOR_SLACK_TOKEN_KEYS") as refused:
        store(factory)
    assert "not-a-fernet-key-but-still-secret" not in str(refused.value) and KEY_A not in str(refused.value)
    output = tutor("slack", "rotate-key", code=1).output
    assert "TUTOR_SLACK_TOKEN_KEYS" in output and "not-a-fernet-key" not in output and KEY_A not in output


def test_rotation_needs_a_key(tutor: Tutor, keys: Keys) -> None:
    output = tutor("slack", "rotate-key", code=1).output
    assert "TUTOR_SLACK_TOKEN_KEYS" in output


def test_new_key_prints_a_fernet_key(tutor: Tutor) -> None:
    printed = tutor("slack", "new-key").output.strip()
    assert Fernet(printed.encode()).decrypt(Fernet(printed.encode()).encrypt(b"x")) == b"x"


def oauth_settings(settings: Settings, fake_slack: FakeSlack) -> Settings:
    return settings.model_copy(
        update={
            "slack_signing_secret": SECRET,
            "slack_client_id": CLIENT,
            "slack_client_secret": "client-secret",
            "slack_api_url": fake_slack.api_url,
        }
    )


def test_multi_workspace_mode_refuses_to_start_without_a_key(
    settings: Settings, fake_slack: FakeSlack, fake_encoder: FakeEncoder, keys: Keys
) -> None:
    with pytest.raises(Exception, match="TUTOR_SLACK_TOKEN_KEYS"):
        create_app(oauth_settings(settings, fake_slack), lambda _: fake_encoder, load_in_background=False)


def test_the_bot_answers_nothing_for_a_workspace_whose_token_does_not_decrypt(
    settings: Settings,
    fake_slack: FakeSlack,
    fake_encoder: FakeEncoder,
    keys: Keys,
    db: tuple[Engine, sessionmaker[Session]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _, factory = db
    keys(KEY_A)
    store(factory).save(installation(bot_token="xoxb-installed-elsewhere"))
    keys(KEY_B)
    configured = oauth_settings(settings, fake_slack).model_copy(update={"slack_token_keys": SecretStr(KEY_B)})
    ingest_with(configured, fake_encoder)
    with (
        caplog.at_level(logging.INFO),
        TestClient(create_app(configured, lambda _: fake_encoder, load_in_background=False)) as client,
    ):
        response = Slack(client, fake_slack).command("quiz")
    assert response.status_code == 200
    assert fake_slack.named("chat.postMessage") == [] and fake_slack.named("chat.postEphemeral") == []
    assert all(call.token != "xoxb-installed-elsewhere" for call in fake_slack.calls)
    assert any(TEAM in r.getMessage() and r.levelno >= logging.ERROR for r in caplog.records)
    texts = [response.text, caplog.text, *(json.dumps(c.payload) for c in fake_slack.calls)]
    assert_no_secret(texts, KEY_A, KEY_B, "xoxb-installed-elsewhere")
