"""A serving process starts with the garbage collector off, and once loaded moves what it loaded
out of the collector's sight and turns it back on."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

import app.cli.main
import app.serving.encoders
from app.cli import launch
from app.config import Settings
from app.main import create_app
from tests.conftest import ingest_with
from tests.fakes import FakeEncoder


def test_loaded_objects_are_frozen_once_ready(settings: Settings, fake_encoder: FakeEncoder) -> None:
    ingest_with(settings, fake_encoder)
    gc.unfreeze()
    app = create_app(settings, lambda _: fake_encoder, load_in_background=False, freeze_gc=True)
    try:
        with TestClient(app) as client:
            assert client.get("/readyz").status_code == 200
            assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_not_frozen_when_not_asked(settings: Settings, fake_encoder: FakeEncoder) -> None:
    ingest_with(settings, fake_encoder)
    gc.unfreeze()
    with TestClient(create_app(settings, lambda _: fake_encoder, load_in_background=False)):
        assert gc.get_freeze_count() == 0


@pytest.fixture
def collector() -> Iterator[None]:
    """Leave the collector on and nothing frozen, whatever the test did."""
    yield
    gc.enable()
    gc.unfreeze()


def test_the_collector_is_turned_back_on_once_loaded(
    settings: Settings, fake_encoder: FakeEncoder, collector: None
) -> None:
    ingest_with(settings, fake_encoder)
    gc.disable()  # as `tutor serve` starts (app.cli.launch)
    with TestClient(create_app(settings, lambda _: fake_encoder, load_in_background=False, freeze_gc=True)) as client:
        assert client.get("/readyz").status_code == 200
        assert gc.isenabled()


def test_the_collector_is_turned_back_on_when_the_load_fails(settings: Settings, collector: None) -> None:
    gc.disable()  # nothing ingested: the app starts, not ready
    with TestClient(create_app(settings, load_in_background=False, freeze_gc=True)) as client:
        assert client.get("/readyz").status_code == 503
        assert gc.isenabled()
        assert gc.get_freeze_count() == 0


@pytest.mark.parametrize(("argv", "serving"), [(["tutor", "serve"], True), (["tutor", "ingest"], False)])
def test_only_serve_starts_with_the_collector_off_and_its_encoder_on_the_way(
    monkeypatch: pytest.MonkeyPatch, collector: None, argv: list[str], serving: bool
) -> None:
    collector_on: list[bool] = []
    early: list[str] = []
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(app.serving.encoders, "build_early", lambda: early.append("started"))
    monkeypatch.setattr(app.cli.main, "app", lambda: collector_on.append(gc.isenabled()))
    launch.main()
    assert collector_on == [not serving]
    assert early == (["started"] if serving else [])
