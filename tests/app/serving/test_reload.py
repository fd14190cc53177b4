"""A running API serves a newer ingestion without a restart (`TUTOR_RELOAD_S`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import app.serving.runtime
from app.config import Settings
from app.main import create_app
from app.serving.runtime import Runtime
from tests.conftest import ingest_with
from tests.fakes import FakeEncoder

NEW = """questions:
  - question: What does an NVSwitch connect?
    accepted_answers: [Every GPU in the node to every other at full NVLink bandwidth]
"""


def _runtime(client: TestClient) -> Runtime:
    return client.app.state.runtime  # type: ignore[attr-defined,no-any-return]


def _add_document(settings: Settings, encoder: FakeEncoder, tmp_path: Path) -> None:
    extra = tmp_path / "nvswitch.yaml"
    extra.write_text(NEW)
    ingest_with(settings, encoder, [extra])


def _find(client: TestClient) -> list[dict]:
    items: list[dict] = client.get("/v1/questions", params={"q": "NVSwitch connect"}).json()["items"]
    return [i for i in items if i["question"] == "What does an NVSwitch connect?"]


def test_a_newer_ingestion_is_served_after_a_reload(
    client: TestClient, settings: Settings, fake_encoder: FakeEncoder, tmp_path: Path,
    make_key: Callable[..., tuple[str, str]],
) -> None:
    runtime = _runtime(client)
    before = runtime.grading()[1].version
    assert runtime.reload_if_changed() is False  # nothing new yet
    _add_document(settings, fake_encoder, tmp_path)
    assert runtime.reload_if_changed() is True
    _, index, book = runtime.grading()
    assert index.version != before and runtime.index is index and runtime.rubrics is book
    (found,) = _find(client)
    _, secret = make_key()
    res = client.post("/v1/grade", json={"question_id": found["id"], "answer": "all GPUs to each other"},
                      headers={"X-API-Key": secret})
    assert res.status_code == 200 and res.json()["question_id"] == found["id"]
    assert runtime.reload_if_changed() is False


def test_a_newer_index_that_fails_to_load_leaves_the_old_one_serving(
    client: TestClient, settings: Settings, fake_encoder: FakeEncoder, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runtime = _runtime(client)
    before = runtime.grading()[1].version
    _add_document(settings, fake_encoder, tmp_path)

    def broken(*_: object) -> None:
        raise OSError("index file unreadable")

    monkeypatch.setattr(app.serving.runtime, "load_index", broken)
    assert runtime.reload_if_changed() is False
    assert runtime.grading()[1].version == before and runtime.problem is None
    assert client.get("/readyz").status_code == 200
    monkeypatch.undo()
    assert runtime.reload_if_changed() is True  # picked up on the next look


def test_the_api_looks_for_ingestions_on_its_own(settings: Settings, fake_encoder: FakeEncoder,
                                                 tmp_path: Path) -> None:
    ingest_with(settings, fake_encoder)
    watched = settings.model_copy(update={"reload_s": 0.1})
    app = create_app(watched, lambda _: fake_encoder, load_in_background=False)
    with TestClient(app) as client:
        before = client.get("/readyz").json()["index_version"]
        _add_document(settings, fake_encoder, tmp_path)
        deadline = time.monotonic() + 20
        while client.get("/readyz").json()["index_version"] == before and time.monotonic() < deadline:
            time.sleep(0.1)
        now = client.get("/readyz").json()["index_version"]
        assert now != before and _runtime(client).grading()[1].version.startswith(now)
