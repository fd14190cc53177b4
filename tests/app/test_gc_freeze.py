"""A serving process moves what it loaded out of the garbage collector's sight once ready."""

from __future__ import annotations

import gc

from fastapi.testclient import TestClient

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
