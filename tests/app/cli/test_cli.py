"""The `tutor` command as a user runs it, with the real model, in a fresh data folder."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import with_onnx
from tests.serving import TUTOR, free_port, run_tutor, serving, wait_ready

pytestmark = pytest.mark.slow


@pytest.fixture
def env(data_dir: Path, onnx_encoder_dir: Path) -> dict[str, str]:
    """The environment of a user whose data folder is `data_dir` (SQLite default, ONNX encoder exported)."""
    with_onnx(data_dir / "index", onnx_encoder_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUTOR_")}
    return {**env, "TUTOR_DATA_DIR": str(data_dir)}


tutor = run_tutor


def _digest(folder: Path) -> dict[str, str]:
    files = (p for p in folder.rglob("*") if p.is_file())
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def test_ingest_twice_embeds_nothing_the_second_time(env: dict[str, str], data_dir: Path) -> None:
    first = json.loads(tutor(env, "ingest", "--json").stdout)
    index_before = _digest(data_dir / "index")
    second = json.loads(tutor(env, "ingest", "--json").stdout)
    assert first["questions"] == 42 and first["embedded"] > 0 and first["added"] == 42
    assert {k: second[k] for k in ("questions", "added", "updated", "unchanged", "retired", "embedded", "skipped")} == {
        "questions": 42, "added": 0, "updated": 0, "unchanged": 42, "retired": 0, "embedded": 0, "skipped": []
    }
    assert _digest(data_dir / "index") == index_before
    items = json.loads(tutor(env, "bank", "list", "--json").stdout)
    assert len(items) == 42
    assert all(i["accepted_answers"] for i in items)
    assert sum(1 for i in items if len(i["wrong_options"]) == 3) == 32
    assert sum(1 for i in items if i["explanation"]) == 17
    shown = json.loads(tutor(env, "bank", "show", items[0]["id"], "--json").stdout)
    assert shown == items[0]
    assert tutor(env, "bank", "show", "q_nope", check=False).returncode == 1
    hits = json.loads(tutor(env, "search", "what does the zero redundancy optimizer shard", "--json").stdout)
    assert "ZeRO" in hits[0]["question"]


def test_ingest_reports_bad_documents_and_exits_non_zero(env: dict[str, str], data_dir: Path) -> None:
    tutor(env, "ingest")
    bad = data_dir / "bad.txt"
    bad.write_text("Question 1\n\nWhat is NVLink?\n\nAnswer\n\nA cable.\n")
    proc = tutor(env, "ingest", "--json", str(data_dir / "raw"), str(bad), check=False)
    assert proc.returncode == 1
    summary = json.loads(proc.stdout)
    assert summary["questions"] == 42
    assert summary["skipped"] == [{"file": "bad.txt", "line": 0, "reason": summary["skipped"][0]["reason"]}]
    assert "unknown layout" in summary["skipped"][0]["reason"]


@pytest.fixture
def served(env: dict[str, str]) -> Iterator[str]:
    tutor(env, "ingest")
    with serving(env) as base:
        yield base


def test_serve_answers_health_and_lists_questions(served: str) -> None:
    assert httpx.get(f"{served}/healthz").status_code == 200
    assert httpx.get(f"{served}/readyz").json()["backend"] == "onnx"
    page = httpx.get(f"{served}/v1/questions", params={"limit": 100}).json()
    assert page["total"] == 42
    assert all("accepted_answers" not in item for item in page["items"])


def test_a_killed_server_stores_every_acknowledged_grade_at_its_next_start(env: dict[str, str], data_dir: Path) -> None:
    """SIGKILL after graded answers were acknowledged (and before the journal moved them): the next
    `tutor serve` on the same data folder stores each of them once, with the key's usage."""
    tutor(env, "ingest")
    (secret,) = re.findall(r"^secret: (\S+)$", tutor(env, "keys", "create", "killer").stdout, re.M)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    slow_mover = {**env, "TUTOR_JOURNAL_INTERVAL_MS": str(3_600_000)}  # nothing moves before the kill
    proc = subprocess.Popen([*TUTOR, "serve", "--port", str(port)], env=slow_mover, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_ready(base, 120, lambda: None if proc.poll() is None else "tutor serve exited")
        qid = httpx.get(f"{base}/v1/questions", params={"q": "all-reduce"}).json()["items"][0]["id"]
        ids = []
        for i in range(5):
            res = httpx.post(f"{base}/v1/grade", json={"question_id": qid, "answer": f"it sums the gradients {i}"},
                             headers={"X-API-Key": secret})
            assert res.status_code == 200, res.text
            ids.append(res.json()["attempt_id"])
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    def stored() -> tuple[int, int]:
        with sqlite3.connect(data_dir / "tutor.db") as db:
            attempts = db.execute(f"SELECT count(*) FROM attempts WHERE id IN ({','.join('?' * len(ids))})", ids)
            calls = db.execute("SELECT coalesce(sum(calls), 0) FROM api_usage WHERE endpoint = 'grade'")
            return attempts.fetchone()[0], calls.fetchone()[0]

    assert stored() == (0, 0)
    with serving(env):
        deadline = time.monotonic() + 30
        while stored() != (5, 5) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert stored() == (5, 5)
    assert stored() == (5, 5)
    assert list((data_dir / "journal").glob("attempts-*")) == []
