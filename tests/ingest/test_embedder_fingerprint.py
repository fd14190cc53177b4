"""The model fingerprint: a content hash, remembered by file size and time so start-up skips it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ingest import embedder


def _model(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"hidden_size": 4}')
    (model / "model.safetensors").write_bytes(b"weights-1")
    return model


def test_fingerprint_is_remembered_and_recomputed_when_a_file_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    model = _model(tmp_path)
    compute = embedder.model_fingerprint.__wrapped__
    first = compute(model)
    assert (tmp_path / "cache" / "gpu-tutor" / "model-fingerprints.json").exists()
    hashed: list[Path] = []
    real_read = Path.read_bytes

    def spy(self: Path) -> bytes:
        hashed.append(self)
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", spy)
    assert compute(model) == first and hashed == []  # remembered: nothing read again
    (model / "model.safetensors").write_bytes(b"weights-2")
    os.utime(model / "model.safetensors", ns=(1, 1))
    assert compute(model) != first and hashed  # changed weights: hashed again, new fingerprint


def test_an_unwritable_cache_only_costs_the_hash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    model = _model(tmp_path)
    compute = embedder.model_fingerprint.__wrapped__
    assert compute(model) == compute(model)
