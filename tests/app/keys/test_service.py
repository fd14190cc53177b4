"""Key creation, authentication, revocation and usage counting, on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import re
import threading

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from app.db import transaction
from app.errors import NotFoundError, TutorError, UnauthorizedError
from app.keys import service
from app.keys.service import UsageRow, authenticate, list_keys, record_usage, revoke, usage, usage_totals
from app.models import ApiKey
from tests.app.keys.conftest import make_key


def test_created_key_stores_only_a_hash(factory: sessionmaker[Session]) -> None:
    key, secret = make_key(factory, name="  ci bot ", scopes=("author", "grade"), rate_limit="60/minute")
    assert re.fullmatch(r"gt_[A-Za-z0-9_-]{43}", secret)
    assert re.fullmatch(r"k_[0-9a-f]{12}", key.id)
    with factory() as session:
        row = session.execute(text("SELECT * FROM api_keys")).mappings().one()
    assert secret not in str(dict(row))
    assert row["secret_hash"] == hashlib.sha256(secret.encode()).hexdigest()
    assert row["prefix"] == secret[:11] and len(row["prefix"]) <= 16
    assert row["name"] == "ci bot" and row["rate_limit"] == "60/minute"
    assert key.scopes == ["grade", "author"]


def test_authenticate_accepts_the_secret_and_refuses_others(factory: sessionmaker[Session]) -> None:
    key, secret = make_key(factory)
    other, _ = make_key(factory, name="other")
    with factory() as session:
        assert authenticate(session, secret).id == key.id != other.id
        for bad in (None, ""):
            with pytest.raises(UnauthorizedError, match="missing API key"):
                authenticate(session, bad)
        for bad in (secret[:-1] + ("A" if secret[-1] != "A" else "B"), secret[3:], secret + "x" * 200, key.prefix):
            with pytest.raises(UnauthorizedError, match="unknown API key"):
                authenticate(session, bad)


def test_revoked_key_stops_working_and_revoking_twice_keeps_the_time(factory: sessionmaker[Session]) -> None:
    key, secret = make_key(factory)
    with transaction(factory) as session:
        first = revoke(session, key.id).revoked_at
    with transaction(factory) as session:
        again = revoke(session, key.id).revoked_at
        assert first is not None and again is not None
        # SQLite hands timestamps back without their zone.
        assert again.replace(tzinfo=None) == first.replace(tzinfo=None)
        with pytest.raises(UnauthorizedError, match="revoked"):
            authenticate(session, secret)
        with pytest.raises(NotFoundError):
            revoke(session, "k_000000000000")
        assert [k.id for k in list_keys(session)] == [key.id]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rate_limit": "lots"}, "invalid rate limit"),
        ({"rate_limit": "10 per fortnight"}, "invalid rate limit"),
        ({"scopes": ("admin",)}, "invalid scopes"),
        ({"scopes": ()}, "invalid scopes"),
        ({"name": "  "}, "needs a name"),
    ],
)
def test_create_refuses_bad_input(factory: sessionmaker[Session], kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(TutorError, match=message), transaction(factory) as session:
        service.create_key(session, **{"name": "x", **kwargs})  # type: ignore[arg-type]
    with factory() as session:
        assert session.scalars(select(ApiKey)).all() == []


def test_usage_is_counted_per_day_and_endpoint(factory: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch) -> None:
    key, _ = make_key(factory)
    other, _ = make_key(factory, name="other")
    with transaction(factory) as session:
        record_usage(session, key.id, "grade", 1)
        record_usage(session, key.id, "grade", 1)
        record_usage(session, key.id, "grade.batch", 40)
        record_usage(session, other.id, "grade", 5)
    monkeypatch.setattr(service, "today", lambda: "2999-01-02")
    with transaction(factory) as session:
        record_usage(session, key.id, "grade", 2)
    with factory() as session:
        rows = usage(session, key.id)
        totals = usage_totals(session)
    day = rows[0].day
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", day)
    assert rows == [
        UsageRow(day, "grade", 2, 2),
        UsageRow(day, "grade.batch", 1, 40),
        UsageRow("2999-01-02", "grade", 1, 2),
    ]
    assert totals == {key.id: (4, 44), other.id: (1, 5)}


def test_usage_rejects_unknown_keys_and_bad_arguments(factory: sessionmaker[Session]) -> None:
    key, _ = make_key(factory)
    with factory() as session:
        with pytest.raises(NotFoundError):
            usage(session, "k_nope")
        with pytest.raises(ValueError, match="endpoint"):
            record_usage(session, key.id, "x" * 65)
        with pytest.raises(ValueError, match="negative"):
            record_usage(session, key.id, "grade", -1)


def test_concurrent_usage_counts_every_call(factory: sessionmaker[Session]) -> None:
    key, _ = make_key(factory)
    start = threading.Barrier(20)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            start.wait()
            with transaction(factory) as session:
                record_usage(session, key.id, "grade", 3)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with factory() as session:
        assert [(r.calls, r.items) for r in usage(session, key.id)] == [(20, 60)]
