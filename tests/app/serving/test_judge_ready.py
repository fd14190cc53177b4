"""A damaged pair or late judge keeps the service from saying it is ready, and says why without internals."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.config import JUDGE_DIR, LATE_JUDGE_DIR, Settings
from app.grading.pairjudge import ONNX_FILE
from app.main import create_app
from tests.conftest import ingest_with
from tests.fakes import FakeEncoder


@pytest.mark.parametrize(("setting", "committed", "named"), [
    ("judge_dir", JUDGE_DIR, "pair judge"),
    # Checked even where the serving encoder keeps no layer states (here a fake, which the late judge
    # cannot read): a broken file is reported, not served around.
    ("late_judge_dir", LATE_JUDGE_DIR, "late judge"),
])
def test_a_damaged_judge_makes_readyz_answer_503_with_the_reason(
        settings: Settings, fake_encoder: FakeEncoder, tmp_path: Path, setting: str, committed: Path,
        named: str) -> None:
    damaged = tmp_path / "judge"
    shutil.copytree(committed, damaged)
    model = damaged / ONNX_FILE
    data = bytearray(model.read_bytes())
    data[-100] ^= 0x01
    model.write_bytes(bytes(data))
    ingest_with(settings, fake_encoder)
    app = create_app(settings.model_copy(update={setting: damaged}), lambda _: fake_encoder,
                     load_in_background=False)
    with TestClient(app) as client:
        ready = client.get("/readyz")
    assert ready.status_code == 503
    text = ready.text
    assert named in text and "manifest" in text
    assert str(tmp_path) not in text  # no server path reaches a client


def test_the_committed_judge_makes_the_service_ready(settings: Settings, fake_encoder: FakeEncoder) -> None:
    ingest_with(settings, fake_encoder)
    app = create_app(settings, lambda _: fake_encoder, load_in_background=False)
    with TestClient(app) as client:
        assert client.get("/readyz").status_code == 200
