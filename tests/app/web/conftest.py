"""A served app (uvicorn in a thread, real model, in-process demo runner) and a headless Chromium."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.config import Settings
from app.db import make_engine, make_sessionmaker, transaction
from app.main import create_app
from app.models import Question
from ingest.embedder import Encoder
from tests.app.chat.fake_demos import FakeDemoRunner
from tests.conftest import ROOT, SEEDS, ingest_with
from tests.serving import free_port, serving_in_thread

CHROMIUM = Path("/usr/bin/chromium")


@dataclass
class Served:
    """A running app: its base URL and settings."""

    url: str
    settings: Settings

    def question(self, question_id: str) -> Question:
        """A bank question, read straight from the app's database."""
        engine = make_engine(self.settings.db_url)
        try:
            with transaction(make_sessionmaker(engine)) as session:
                row = session.get(Question, question_id)
                assert row is not None
                return row
        finally:
            engine.dispose()

ARTIFACTS = ROOT / "artifacts" / "widget"

# A note an author could add (`tutor ingest my-notes/`) that tries every way to run script on the page.
HOSTILE_NOTE = """---
title: A hostile note
topics: [async-training]
references:
  - id: x
    organisation: Nobody
    title: "Nothing"
    year: 2025
---

## Script in every form

Plain text <script>window.__pwned = "script"</script> then <img src=x onerror="window.__pwned='img'"> then
<iframe src="javascript:window.__pwned='iframe'"></iframe> [x].

A [javascript link](javascript:window.__pwned='link') and a [data link](data:text/html,<script>alert(1)</script>)
and an autolink <javascript:alert(1)> and <b onclick="window.__pwned='b'">raw bold</b>.

<div style="position:fixed;inset:0" onmouseover="window.__pwned='div'">raw block</div>
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, real_encoder: Encoder) -> Iterator[Served]:
    """The whole app over real HTTP on a free port, once /readyz answers."""
    data = tmp_path_factory.mktemp("web") / "data"
    shutil.copytree(SEEDS, data / "raw")
    shutil.copytree(ROOT / "data" / "notes", data / "notes")
    (data / "notes" / "hostile.md").write_text(HOSTILE_NOTE, encoding="utf-8")
    for name in ("taxonomy.yaml", "annotations.yaml"):
        shutil.copy(ROOT / "data" / name, data / name)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    settings = Settings(data_dir=data, database_url=f"sqlite:///{data / 'tutor.db'}", cors_origins=[base])
    summary = ingest_with(settings, real_encoder, [settings.raw_path, settings.notes_path])
    assert summary.skipped == [], summary.skipped
    app = create_app(settings, lambda _: real_encoder, load_in_background=False)
    app.state.demo_runner = FakeDemoRunner()
    with serving_in_thread(app, port=port) as served_base:
        yield Served(served_base, settings)

@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium driven by Playwright (no browser download)."""
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        pytest.fail("headless tests need Debian's chromium: apt-get install -y chromium")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
        )
        yield browser
        browser.close()


@pytest.fixture
def shots() -> Path:
    """Where screenshots go (artifacts/ is git-ignored)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
