"""Installations and OAuth states of the multi-workspace install, kept in the tutor's own database.

Tokens at rest. Every secret Slack hands over at install time (the bot and user tokens, their
refresh tokens, the incoming-webhook URL) is encrypted before the row is written and decrypted when
it is read; the rest of the installation (ids, scopes, names) stays readable JSON:

- Keys: `TUTOR_SLACK_TOKEN_KEYS`, comma-separated Fernet keys, newest first (`cryptography`'s
  MultiFernet): the newest encrypts, every listed key decrypts, so a new key can be put in front
  while rows written under the old one keep working until `tutor slack rotate-key` re-encrypts them.
- Storage: the row's `data` JSON keeps no secret field; instead `encrypted_tokens` holds one Fernet
  token of the secrets as JSON, together with the row's own key, so a ciphertext copied onto another
  workspace's row does not decrypt there. No column changes, so no migration.
- No key: the store cannot be built, so the OAuth (multi-workspace) mode refuses to start with an
  error naming the setting. Single-workspace mode takes its token from `TUTOR_SLACK_BOT_TOKEN` and
  stores none, so it needs no key.
- Rows from before encryption (secrets as plain JSON fields) are still read, with one warning per
  row and process, and `tutor slack rotate-key` encrypts them.
- A row no configured key decrypts is logged as an error naming the installation (never a token or
  key) and treated as not installed: Bolt runs no listener and posts nothing for that workspace.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from pydantic import SecretStr
from slack_sdk.oauth.installation_store import Bot, Installation, InstallationStore
from slack_sdk.oauth.state_store import OAuthStateStore
from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings, get_settings
from app.db import transaction
from app.errors import TutorError
from app.models import SlackInstallation, SlackOAuthState, as_utc, utcnow

log = logging.getLogger(__name__)
Factory = Callable[[], sessionmaker[Session]]
SCOPE_FIELDS = ("bot_scopes", "user_scopes")
# An installation's secrets: never stored in plain text.
SECRET_FIELDS = ("bot_token", "user_token", "bot_refresh_token", "user_refresh_token", "incoming_webhook_url")
SEALED_FIELD = "encrypted_tokens"
KEYS_SETTING = "TUTOR_SLACK_TOKEN_KEYS"


class SlackTokenKeyError(TutorError):
    """TUTOR_SLACK_TOKEN_KEYS missing or malformed (the message never repeats a key)."""

    status = 500
    code = "slack_token_keys"


class UnreadableInstallationsError(TutorError):
    """Stored installations that no configured key decrypts (named by installation key only)."""

    status = 500
    code = "slack_tokens_unreadable"


class UnreadableTokens(Exception):
    """One installation's encrypted tokens could not be read; the message says why, never what."""


class TokenCipher:
    """Encrypts an installation's secrets with the newest key; decrypts with any configured key."""

    def __init__(self, keys: Sequence[str]) -> None:
        if not keys:
            raise SlackTokenKeyError(f"{KEYS_SETTING} lists no key")
        fernets = []
        for position, key in enumerate(keys, 1):
            try:
                fernets.append(Fernet(key))
            except (ValueError, TypeError):
                # The key itself stays out of the message (and of the chained exception).
                raise SlackTokenKeyError(
                    f"key {position} of {KEYS_SETTING} is not a Fernet key (32 url-safe base64-encoded bytes; "
                    "`tutor slack new-key` prints one)"
                ) from None
        self._newest = fernets[0]
        self._any = MultiFernet(fernets)

    @classmethod
    def from_settings(cls, settings: Settings) -> TokenCipher:
        """The cipher for TUTOR_SLACK_TOKEN_KEYS; SlackTokenKeyError when it is not set."""
        value = settings.slack_token_keys
        raw = value.get_secret_value() if isinstance(value, SecretStr) else str(value or "")
        keys = [k.strip() for k in raw.split(",") if k.strip()]
        if not keys:
            raise SlackTokenKeyError(
                f"the multi-workspace Slack install stores each workspace's tokens encrypted: set {KEYS_SETTING} "
                "to a Fernet key (`tutor slack new-key` prints one)"
            )
        return cls(keys)

    def seal(self, installation_key: str, values: dict[str, str]) -> str:
        """The secrets as one Fernet token (newest key), bound to the installation's row key."""
        payload = json.dumps({"installation": installation_key, **values}, sort_keys=True)
        return self._any.encrypt(payload.encode()).decode("ascii")

    def open(self, installation_key: str, sealed: str) -> dict[str, str]:
        """The secrets sealed for this installation; UnreadableTokens if no key decrypts them."""
        try:
            payload = json.loads(self._any.decrypt(sealed.encode("ascii")))
        except (InvalidToken, ValueError, TypeError):
            raise UnreadableTokens(f"no key in {KEYS_SETTING} decrypts its tokens") from None
        if not isinstance(payload, dict) or payload.pop("installation", None) != installation_key:
            raise UnreadableTokens("its tokens were encrypted for another installation")
        return {k: str(v) for k, v in payload.items() if k in SECRET_FIELDS}

    def is_newest(self, sealed: str) -> bool:
        """Whether the newest key encrypted this token."""
        try:
            self._newest.decrypt(sealed.encode("ascii"))
        except (InvalidToken, ValueError, TypeError):
            return False
        return True


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    """An installation's fields as JSON: datetimes as ISO strings, missing scopes as ''."""
    out = {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in data.items()}
    for name in SCOPE_FIELDS:
        out[name] = out.get(name) or ""
    return out


def _has_plain_secret(data: dict[str, Any]) -> bool:
    return any(data.get(name) is not None for name in SECRET_FIELDS)


def _sealed(cipher: TokenCipher, installation_key: str, data: dict[str, Any]) -> dict[str, Any]:
    """The row's JSON: the installation without its secrets, which go encrypted in SEALED_FIELD."""
    out = {k: v for k, v in data.items() if k not in SECRET_FIELDS and k != SEALED_FIELD}
    values = {name: str(data[name]) for name in SECRET_FIELDS if data.get(name) is not None}
    if values:
        out[SEALED_FIELD] = cipher.seal(installation_key, values)
    return out


class SqlInstallationStore(InstallationStore):
    """Slack's InstallationStore on the tutor's SQLAlchemy models: the latest install per team and per user,
    its secrets encrypted at rest (see the module's docstring)."""

    def __init__(self, client_id: str, factory: Factory, cipher: TokenCipher | None = None) -> None:
        """`cipher`: by default the keys of the process's settings (TUTOR_SLACK_TOKEN_KEYS); without
        any, SlackTokenKeyError, which stops the OAuth mode from starting."""
        self.client_id = client_id
        self._factory = factory
        self._cipher = cipher or TokenCipher.from_settings(get_settings())
        self._warned_plain: set[str] = set()

    @property
    def logger(self) -> logging.Logger:
        """The store's logger."""
        return log

    def _key(self, enterprise_id: str | None, team_id: str | None, user_id: str | None) -> str:
        return f"{self.client_id}:{enterprise_id or ''}:{team_id or ''}:{user_id or ''}"

    def _put(self, session: Session, installation: Installation, user_id: str | None) -> None:
        key = self._key(installation.enterprise_id, installation.team_id, user_id)
        row = session.get(SlackInstallation, key) or SlackInstallation(key=key, client_id=self.client_id)
        row.enterprise_id, row.team_id, row.user_id = installation.enterprise_id, installation.team_id, user_id
        row.data = _sealed(self._cipher, key, _jsonable(installation.to_dict_for_copying()))
        row.installed_at = utcnow()
        session.add(row)

    def save(self, installation: Installation) -> None:
        """Store the installation for its user and, as the workspace's latest, for the team."""
        with transaction(self._factory()) as session:
            self._put(session, installation, installation.user_id)
            if installation.bot_token:
                self._put(session, installation, None)

    def find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        """The latest installation of the workspace (or of one user in it)."""
        team = None if is_enterprise_install else team_id
        with transaction(self._factory()) as session:
            row = session.get(SlackInstallation, self._key(enterprise_id, team, user_id))
            return self._installation(row) if row else None

    def _installation(self, row: SlackInstallation) -> Installation | None:
        """The stored installation with its secrets decrypted; None (logged) when they cannot be."""
        data = dict(row.data)
        sealed = data.pop(SEALED_FIELD, None)
        if sealed is not None:
            try:
                data.update(self._cipher.open(row.key, str(sealed)))
            except UnreadableTokens as exc:
                log.error(
                    "slack installation %s (team %s): %s; the workspace is treated as not installed until "
                    "the key that encrypted it is back in %s or the app is reinstalled there",
                    row.key,
                    row.team_id,
                    exc,
                    KEYS_SETTING,
                )
                return None
        elif _has_plain_secret(data) and row.key not in self._warned_plain:
            self._warned_plain.add(row.key)
            log.warning(
                "slack installation %s holds its tokens in plain text; `tutor slack rotate-key` encrypts them", row.key
            )
        return Installation(**data)

    def find_bot(
        self, *, enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None = False
    ) -> Bot | None:
        """The workspace's bot credentials."""
        found = self.find_installation(
            enterprise_id=enterprise_id, team_id=team_id, is_enterprise_install=is_enterprise_install
        )
        return found.to_bot() if found and found.bot_token else None

    def delete_installation(
        self, *, enterprise_id: str | None, team_id: str | None, user_id: str | None = None
    ) -> None:
        """Forget one user's installation (or the team's)."""
        with transaction(self._factory()) as session:
            session.execute(
                delete(SlackInstallation).where(SlackInstallation.key == self._key(enterprise_id, team_id, user_id))
            )

    def delete_bot(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        """Forget the workspace's bot token."""
        self.delete_installation(enterprise_id=enterprise_id, team_id=team_id)

    def delete_all(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        """Forget everything installed in a workspace (on app_uninstalled / tokens_revoked)."""
        with transaction(self._factory()) as session:
            session.execute(
                delete(SlackInstallation).where(
                    SlackInstallation.client_id == self.client_id,
                    SlackInstallation.enterprise_id == enterprise_id,
                    SlackInstallation.team_id == team_id,
                )
            )


@dataclass
class RotationReport:
    """What `rotate_tokens` did, by installation row."""

    encrypted: int = 0  # rows from before encryption, now encrypted
    reencrypted: int = 0  # rows under an older key, now under the newest
    current: int = 0  # rows already under the newest key (or holding no secret): left as they were
    dropped: list[str] = field(default_factory=list)  # rows no key decrypts, deleted on request

    def summary(self) -> str:
        """One line for the operator."""
        return (
            f"encrypted {self.encrypted} plain-text, re-encrypted {self.reencrypted}, "
            f"already current {self.current}, dropped {len(self.dropped)} unreadable"
        )


def rotate_tokens(
    factory: sessionmaker[Session], cipher: TokenCipher, *, drop_unreadable: bool = False
) -> RotationReport:
    """Re-encrypt every stored installation's secrets with the cipher's newest key, in one transaction.

    Plain-text rows are encrypted; rows already under the newest key are not rewritten, so running it
    again changes nothing. Rows that no key decrypts stop the whole rotation (UnreadableInstallationsError,
    nothing written) unless `drop_unreadable`, which deletes them: those workspaces must reinstall the app.
    """
    report = RotationReport()
    # The rows are locked (PostgreSQL: FOR UPDATE; SQLite: the savepoint's BEGIN IMMEDIATE) so an
    # install that lands meanwhile waits for the rotation instead of being overwritten by it.
    with transaction(factory) as session, session.begin_nested():
        rows = session.scalars(select(SlackInstallation).order_by(SlackInstallation.key).with_for_update()).all()
        unreadable: list[SlackInstallation] = []
        for row in rows:
            data = dict(row.data)
            sealed = data.get(SEALED_FIELD)
            if sealed is None:
                if _has_plain_secret(data):
                    row.data = _sealed(cipher, row.key, data)
                    report.encrypted += 1
                else:
                    report.current += 1
                continue
            try:
                values = cipher.open(row.key, str(sealed))
            except UnreadableTokens:
                unreadable.append(row)
                continue
            if cipher.is_newest(str(sealed)) and not _has_plain_secret(data):
                report.current += 1
                continue
            row.data = _sealed(cipher, row.key, {**data, **values})
            report.reencrypted += 1
        if unreadable and not drop_unreadable:
            raise UnreadableInstallationsError(
                f"no key in {KEYS_SETTING} decrypts {len(unreadable)} installation(s): "
                f"{', '.join(r.key for r in unreadable)}; put the key that encrypted them back in {KEYS_SETTING}, "
                "or pass --drop-unreadable to delete them (those workspaces must then reinstall the app)",
                details={"installations": [r.key for r in unreadable]},
            )
        for row in unreadable:
            session.delete(row)
            report.dropped.append(row.key)
    return report


class SqlStateStore(OAuthStateStore):
    """One-time OAuth state values in the database, so any server process can finish an install."""

    def __init__(self, factory: Factory, expiration_seconds: int = 600) -> None:
        self._factory = factory
        self.expiration_seconds = expiration_seconds

    @property
    def logger(self) -> logging.Logger:
        """The store's logger."""
        return log

    def issue(self, *args: Any, **kwargs: Any) -> str:
        """A new state value."""
        state = secrets.token_urlsafe(24)
        expires = utcnow() + timedelta(seconds=self.expiration_seconds)
        with transaction(self._factory()) as session:
            session.add(SlackOAuthState(state=state, expires_at=expires))
        return state

    def consume(self, state: str) -> bool:
        """True once for a state issued here and not yet expired."""
        with transaction(self._factory()) as session:
            row = session.scalars(select(SlackOAuthState).where(SlackOAuthState.state == state)).first()
            if row is None:
                return False
            session.delete(row)
            return as_utc(row.expires_at) > utcnow()
