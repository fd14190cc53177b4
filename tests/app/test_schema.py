"""The start-up schema check agrees with Alembic."""

from __future__ import annotations

from app.db import HEAD_REVISION, make_engine, migrations_head, schema_is_current, upgrade


def test_head_revision_is_alembics_head() -> None:
    assert migrations_head() == HEAD_REVISION


def test_schema_check_before_and_after_upgrade(db_url: str) -> None:
    engine = make_engine(db_url)
    assert not schema_is_current(engine)
    upgrade(engine)
    assert schema_is_current(engine)
    engine.dispose()
