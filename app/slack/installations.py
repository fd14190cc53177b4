"""Installations and OAuth states of the multi-workspace install, kept in the tutor's own database."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from slack_sdk.oauth.installation_store import Bot, Installation, InstallationStore
from slack_sdk.oauth.state_store import OAuthStateStore
from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from app.db import transaction
from app.models import SlackInstallation, SlackOAuthState, as_utc, utcnow

log = logging.getLogger(__name__)
Factory = Callable[[], sessionmaker[Session]]
SCOPE_FIELDS = ("bot_scopes", "user_scopes")


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    """An installation's fields as JSON: datetimes as ISO strings, missing scopes as ''."""
    out = {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in data.items()}
    for name in SCOPE_FIELDS:
        out[name] = out.get(name) or ""
    return out


class SqlInstallationStore(InstallationStore):
    """Slack's InstallationStore on the tutor's SQLAlchemy models: the latest install per team and per user."""

    def __init__(self, client_id: str, factory: Factory) -> None:
        self.client_id = client_id
        self._factory = factory

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
        row.data, row.installed_at = _jsonable(installation.to_dict_for_copying()), utcnow()
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
            return Installation(**row.data) if row else None

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
