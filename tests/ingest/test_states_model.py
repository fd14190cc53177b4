"""The export with the late judge's layer states among its outputs is derived once, kept beside the
export, checked on every build, and derived again when it is stale or damaged."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

import ingest.onnx_encoder as onnx_encoder
from app.config import Settings
from app.serving.encoders import keep_states_model
from ingest.embedder import Encoder
from ingest.onnx_encoder import STATES_FILE, STATES_RECORD, OnnxEncoder, read_manifest, states_model

pytestmark = pytest.mark.slow

LAYER = 3
TEXT = "each rank keeps one shard of the optimizer state"


@pytest.fixture()
def export(onnx_encoder_dir: Path, tmp_path: Path) -> Path:
    """A copy of the session's export, without any derived states model."""
    folder = tmp_path / "export"
    shutil.copytree(onnx_encoder_dir, folder, ignore=shutil.ignore_patterns("model-int8-states*"))
    return folder


def _no_deriving(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> bytes:
        raise AssertionError("the states model was derived again")

    monkeypatch.setattr(onnx_encoder, "with_outputs", refuse)


def test_it_is_derived_once_then_read_from_its_file(export: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = read_manifest(export)
    path = states_model(export, manifest, LAYER)
    assert path == export / STATES_FILE.format(LAYER)
    record = json.loads((export / STATES_RECORD.format(LAYER)).read_text())
    assert record["source_sha256"] == manifest["sha256"] and record["layer"] == LAYER
    assert not list(export.glob("*.tmp"))
    _no_deriving(monkeypatch)
    assert states_model(export, manifest, LAYER) == path


def test_the_kept_file_gives_the_states_a_derived_model_gives(export: Path, real_encoder: Encoder,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from_file = OnnxEncoder(export, real_encoder.model_id, threads=1, states_layer=LAYER)
    assert (export / STATES_FILE.format(LAYER)).is_file()
    with monkeypatch.context() as patch:
        patch.setattr(onnx_encoder, "states_model", lambda folder, manifest, layer: onnx_encoder.with_outputs(
            folder / onnx_encoder.ONNX_FILE, [onnx_encoder.LAYER_STATES.format(layer)]))
        in_memory = OnnxEncoder(export, real_encoder.model_id, threads=1, states_layer=LAYER)
    np.testing.assert_array_equal(from_file.layer_states([TEXT])[0], in_memory.layer_states([TEXT])[0])
    np.testing.assert_array_equal(from_file.encode([TEXT]), in_memory.encode([TEXT]))


@pytest.mark.parametrize("fault", ["damaged", "stale", "record"])
def test_a_damaged_or_stale_one_is_derived_again(export: Path, fault: str) -> None:
    manifest = read_manifest(export)
    path = states_model(export, manifest, LAYER)
    assert isinstance(path, Path)
    good = path.read_bytes()
    record = export / STATES_RECORD.format(LAYER)
    if fault == "damaged":
        path.write_bytes(good[:1000])
    elif fault == "stale":  # the export was made again since
        record.write_text(json.dumps({**json.loads(record.read_text()), "source_sha256": "0" * 64}))
    else:
        record.write_text("{not json")
    assert states_model(export, manifest, LAYER) == path
    assert path.read_bytes() == good
    assert json.loads(record.read_text())["source_sha256"] == manifest["sha256"]


def test_an_unwritable_folder_serves_it_from_memory(export: Path, monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    def read_only(*_: object) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(onnx_encoder.os, "replace", read_only)
    with caplog.at_level(logging.WARNING, logger=onnx_encoder.__name__):
        model = states_model(export, read_manifest(export), LAYER)
    assert isinstance(model, bytes) and len(model) > 1_000_000
    assert "holding it in memory" in caplog.text
    assert not (export / STATES_FILE.format(LAYER)).exists() and not list(export.glob("*.tmp"))


def test_the_export_command_keeps_the_late_judges_layer(export: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keep_states_model(Settings(), export)
    layer = json.loads((Settings().late_judge_dir / "judge.json").read_text())["states_layer"]
    assert (export / STATES_FILE.format(layer)).is_file()
    _no_deriving(monkeypatch)
    OnnxEncoder(export, read_manifest(export)["model_id"], threads=1, states_layer=layer)  # type: ignore[arg-type]
