"""`tutor serve` builds its encoder early (app.cli.launch) and the app takes that one, once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config import Settings
from app.serving import encoders
from ingest.embedder import Encoder
from tests.fakes import FakeEncoder


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[tuple[Settings, str]]]:
    """Each `default_encoder` call, with the thread it ran on; settings come from the environment."""
    seen: list[tuple[Settings, str]] = []

    def build(settings: Settings) -> Encoder:
        seen.append((settings, threading.current_thread().name))
        return FakeEncoder()

    monkeypatch.setenv("TUTOR_DATA_DIR", str(tmp_path))
    encoders.get_settings.cache_clear()
    monkeypatch.setattr(encoders, "default_encoder", build)
    monkeypatch.setattr(encoders, "_early", None)  # and back to what it was, whatever a test left
    yield seen
    encoders.get_settings.cache_clear()


def test_the_early_encoder_is_built_on_its_own_thread_and_handed_over_once(builds: list[tuple[Settings, str]]) -> None:
    encoders.build_early()
    settings = encoders.get_settings()
    first = encoders.serving_encoder(settings)
    assert [name for _, name in builds] == ["tutor-encoder-early"]
    second = encoders.serving_encoder(settings)  # a reload after a failed load builds anew
    assert second is not first
    assert [name for _, name in builds] == ["tutor-encoder-early", threading.current_thread().name]


def test_other_settings_get_their_own_encoder(builds: list[tuple[Settings, str]], tmp_path: Path) -> None:
    encoders.build_early()
    other = Settings(data_dir=tmp_path / "other")
    encoders.serving_encoder(other)
    assert builds[-1] == (other, threading.current_thread().name)


def test_without_an_early_build_the_encoder_is_built_when_asked(builds: list[tuple[Settings, str]]) -> None:
    settings = encoders.get_settings()
    encoders.serving_encoder(settings)
    assert builds == [(settings, threading.current_thread().name)]


def test_the_early_build_s_error_reaches_the_app(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken(settings: Settings) -> Encoder:
        raise RuntimeError("no encoder here")

    monkeypatch.setenv("TUTOR_DATA_DIR", str(tmp_path))
    encoders.get_settings.cache_clear()
    monkeypatch.setattr(encoders, "default_encoder", broken)
    monkeypatch.setattr(encoders, "_early", None)
    try:
        encoders.build_early()
        with pytest.raises(RuntimeError, match="no encoder here"):
            encoders.serving_encoder(encoders.get_settings())
    finally:
        encoders.get_settings.cache_clear()
