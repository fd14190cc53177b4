"""What a serving process imports: nothing it never uses (each import stays resident)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)


def test_the_app_on_the_sqlite_default_does_not_import_psycopg_and_the_queue_and_postgresql_still_work(
        tmp_path: Path) -> None:
    done = _run(f"""
        import sys
        import app.main
        assert "psycopg" not in sys.modules, "the app imported psycopg"
        from contracts.jobs import JobQueue
        queue = JobQueue({str(tmp_path / "queue.db")!r}, "token")
        queue.put_job("demo_cpu_2", {{"job": 1}})
        assert queue.take("demo_cpu_2") is not None
        import psycopg  # still importable for a PostgreSQL database
        from sqlalchemy import create_engine
        create_engine("postgresql+psycopg://127.0.0.1/test").dialect.dbapi.connect
        print("ok")
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize("first", ["psycopg", "huey.storage"])
def test_the_queue_leaves_huey_as_it_is_when_psycopg_or_huey_came_first(first: str) -> None:
    done = _run(f"""
        import {first}
        import contracts.jobs
        import huey.storage
        print(huey.storage.psycopg is not None)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
