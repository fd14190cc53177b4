"""API keys: create, authenticate, revoke, list, and count usage per key, day and endpoint."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING

import limits
from sqlalchemy import Connection, func, select
from sqlalchemy.orm import Session

from app.db import get_or_404, on_conflict_insert
from app.errors import TutorError, UnauthorizedError
from app.models import ApiKey, ApiUsage, utcnow

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql, sqlite

SECRET_PREFIX = "gt_"
KNOWN_SCOPES = ("grade", "author")
# A secret is "gt_" + 43 url-safe characters; anything much longer is not one of ours.
MAX_SECRET_CHARS = 128
MAX_ENDPOINT_CHARS = 64
_DISPLAY_CHARS = 8


@dataclass(frozen=True)
class UsageRow:
    """Calls and graded items of one key on one UTC day at one endpoint."""

    day: str
    endpoint: str
    calls: int
    items: int


@dataclass(frozen=True)
class Caller:
    """The key a request was authenticated with: a snapshot of the row, safe to share between threads."""

    id: str
    scopes: tuple[str, ...]
    rate_limit: str | None

    @classmethod
    def of(cls, key: ApiKey) -> Caller:
        """The snapshot of a key row."""
        return cls(key.id, tuple(key.scopes), key.rate_limit)


def hash_secret(secret: str) -> str:
    """The stored form of a secret: sha256 hex (the secrets are random, so no slow KDF is needed)."""
    return hashlib.sha256(secret.encode()).hexdigest()


def validate_rate_limit(rate_limit: str) -> str:
    """The rate-limit string if `limits` can parse it (e.g. "60/minute", "10/second;500/hour")."""
    try:
        limits.parse_many(rate_limit)
    except ValueError as exc:
        raise TutorError(
            f"invalid rate limit {rate_limit!r}: use forms like '60/minute' or '10/second;500/hour'",
            details={"rate_limit": rate_limit},
        ) from exc
    return rate_limit


def _validate_scopes(scopes: Sequence[str]) -> list[str]:
    unknown = sorted(set(scopes) - set(KNOWN_SCOPES))
    if unknown or not scopes:
        raise TutorError(
            f"invalid scopes {list(scopes)!r}: choose from {', '.join(KNOWN_SCOPES)}",
            details={"scopes": list(scopes), "known": list(KNOWN_SCOPES)},
        )
    return sorted(set(scopes), key=KNOWN_SCOPES.index)


def create_key(
    session: Session, *, name: str, scopes: Sequence[str] = ("grade",), rate_limit: str | None = None
) -> tuple[ApiKey, str]:
    """Create a key; returns the row and the secret, which is never stored and cannot be shown again."""
    if not name.strip():
        raise TutorError("a key needs a name", details={"name": name})
    token = secrets.token_urlsafe(32)
    secret = SECRET_PREFIX + token
    key = ApiKey(
        id="k_" + secrets.token_hex(6),
        name=name.strip(),
        prefix=SECRET_PREFIX + token[:_DISPLAY_CHARS],
        secret_hash=hash_secret(secret),
        scopes=_validate_scopes(scopes),
        rate_limit=validate_rate_limit(rate_limit) if rate_limit else None,
        created_at=utcnow(),
    )
    session.add(key)
    session.flush()
    return key, secret


def authenticate(session: Session, secret: str | None) -> ApiKey:
    """The active key whose secret this is; UnauthorizedError for a missing, unknown or revoked key."""
    if not secret:
        raise UnauthorizedError("missing API key: send it in the X-API-Key header")
    if not secret.startswith(SECRET_PREFIX) or len(secret) > MAX_SECRET_CHARS:
        raise UnauthorizedError("unknown API key")
    digest = hash_secret(secret)
    key = session.scalars(select(ApiKey).where(ApiKey.secret_hash == digest)).first()
    # The lookup is by hash, so its timing says nothing useful; the compare is belt and braces.
    if key is None or not hmac.compare_digest(key.secret_hash, digest):
        raise UnauthorizedError("unknown API key")
    if key.revoked_at is not None:
        raise UnauthorizedError(f"API key {key.id} has been revoked", details={"key_id": key.id})
    return key


def get_key(session: Session, key_id: str) -> ApiKey:
    """One key by id, revoked or not."""
    return get_or_404(session, ApiKey, key_id, "API key")


def revoke(session: Session, key_id: str) -> ApiKey:
    """Revoke a key at once; revoking it again keeps the first revocation time."""
    key = get_key(session, key_id)
    if key.revoked_at is None:
        key.revoked_at = utcnow()
        session.flush()
    return key


def list_keys(session: Session) -> list[ApiKey]:
    """Every key, oldest first (revoked ones included)."""
    return list(session.scalars(select(ApiKey).order_by(ApiKey.created_at, ApiKey.id)))


def today() -> str:
    """Today's UTC date as YYYY-MM-DD, the day usage is counted under."""
    return datetime.now(UTC).date().isoformat()


def record_usage(session: Session, key_id: str, endpoint: str, items: int = 1, calls: int = 1) -> None:
    """Add `calls` calls (one by default) and `items` graded items to today's counter of this key and endpoint."""
    add_usage(session.connection(), key_id, endpoint, items, calls)


def add_usage(connection: Connection, key_id: str, endpoint: str, items: int = 1, calls: int = 1) -> None:
    """`record_usage` on a Core connection (the group writer's transaction)."""
    if len(endpoint) > MAX_ENDPOINT_CHARS:
        raise ValueError(f"endpoint name over {MAX_ENDPOINT_CHARS} characters: {endpoint!r}")
    if items < 0 or calls < 0:
        raise ValueError("calls and items must not be negative")
    values = {"key_id": key_id, "day": today(), "endpoint": endpoint, "calls": calls, "items": items}
    # One atomic statement: concurrent callers serialise on the row and none of them is lost.
    # Run on the connection: the statement is built once, and Core executes it without ORM bookkeeping.
    connection.execute(_usage_upsert(connection.dialect.name), values)


@cache
def _usage_upsert(dialect: str) -> postgresql.Insert | sqlite.Insert:
    """INSERT ... ON CONFLICT DO UPDATE adding to today's counter (built once per dialect, then reused)."""
    stmt = on_conflict_insert(dialect, ApiUsage)
    return stmt.on_conflict_do_update(
        index_elements=[ApiUsage.key_id, ApiUsage.day, ApiUsage.endpoint],
        set_={"calls": ApiUsage.calls + stmt.excluded["calls"], "items": ApiUsage.items + stmt.excluded["items"]},
    )


def usage(session: Session, key_id: str) -> list[UsageRow]:
    """A key's usage per day and endpoint, oldest day first."""
    get_key(session, key_id)
    rows = session.scalars(select(ApiUsage).where(ApiUsage.key_id == key_id).order_by(ApiUsage.day, ApiUsage.endpoint))
    return [UsageRow(r.day, r.endpoint, r.calls, r.items) for r in rows]


def usage_totals(session: Session) -> dict[str, tuple[int, int]]:
    """Total (calls, items) per key id, over all days and endpoints."""
    stmt = select(ApiUsage.key_id, func.sum(ApiUsage.calls), func.sum(ApiUsage.items)).group_by(ApiUsage.key_id)
    return {key_id: (int(calls or 0), int(items or 0)) for key_id, calls, items in session.execute(stmt)}
