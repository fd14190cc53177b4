"""`tutor keys` in-process: create prints a working secret once, list and revoke."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from app.db import transaction
from app.errors import UnauthorizedError
from app.keys.service import authenticate, record_usage
from tests.conftest import Tutor


def test_create_prints_a_secret_that_works_and_only_its_hash_is_stored(
    tutor: Tutor, factory: sessionmaker[Session]
) -> None:
    result = tutor("keys", "create", "ci bot", "--scope", "grade", "--scope", "author", "--rate-limit", "60/minute")
    (secret,) = re.findall(r"^secret: (gt_[A-Za-z0-9_-]{43})$", result.stdout, re.M)
    (key_id,) = re.findall(r"^key id: (k_[0-9a-f]{12})$", result.stdout, re.M)
    assert "cannot be shown again" in result.stderr and secret not in result.stderr
    with factory() as session:
        key = authenticate(session, secret)
        rows = session.execute(text("SELECT * FROM api_keys")).mappings().all()
    assert key.id == key_id and key.scopes == ["grade", "author"] and key.rate_limit == "60/minute"
    assert len(rows) == 1 and secret not in str(dict(rows[0]))
    assert rows[0]["secret_hash"] == hashlib.sha256(secret.encode()).hexdigest()


def test_list_shows_keys_and_usage_but_no_secret(tutor: Tutor, factory: sessionmaker[Session]) -> None:
    first = tutor("keys", "create", "first").stdout
    tutor("keys", "create", "second")
    (secret,) = re.findall(r"^secret: (\S+)$", first, re.M)
    with transaction(factory) as session:
        key = authenticate(session, secret)
        record_usage(session, key.id, "grade", 4)
        record_usage(session, key.id, "grade.batch", 10)
    listed = json.loads(tutor("keys", "list", "--json").stdout)
    assert [k["name"] for k in listed] == ["first", "second"]
    assert (listed[0]["calls"], listed[0]["items"], listed[1]["calls"]) == (2, 14, 0)
    assert listed[0]["prefix"] == secret[:11] and listed[0]["scopes"] == ["grade"]
    table = tutor("keys", "list").stdout
    assert key.id in table and "second" in table and secret not in table and secret not in str(listed)


def test_revoke_stops_the_secret(tutor: Tutor, factory: sessionmaker[Session]) -> None:
    created = tutor("keys", "create", "temp").stdout
    (secret,) = re.findall(r"^secret: (\S+)$", created, re.M)
    (key_id,) = re.findall(r"^key id: (\S+)$", created, re.M)
    assert f"revoked {key_id}" in tutor("keys", "revoke", key_id).stdout
    with factory() as session, pytest.raises(UnauthorizedError, match="revoked"):
        authenticate(session, secret)
    (row,) = json.loads(tutor("keys", "list", "--json").stdout)
    assert row["revoked_at"].endswith("+00:00") and row["created_at"].endswith("+00:00")


def test_bad_input_exits_1_with_a_message(tutor: Tutor, factory: sessionmaker[Session]) -> None:
    assert "no API key" in tutor("keys", "revoke", "k_nope", code=1).stderr
    assert "invalid scopes" in tutor("keys", "create", "x", "--scope", "admin", code=1).stderr
    assert "invalid rate limit" in tutor("keys", "create", "x", "--rate-limit", "lots", code=1).stderr
    assert json.loads(tutor("keys", "list", "--json").stdout) == []
