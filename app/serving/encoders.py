"""The serving encoder: which one a process serves with, and building it early for `tutor serve`.

This module imports only the settings and the encoders (no web framework, no ORM), so that
`app.cli.launch` can start building the encoder before the rest of the serving stack is imported.
Building it is mostly onnxruntime's own work, which releases the GIL: on a thread beside the
imports it comes almost for free (`bench/bench_api.py`, start-up to ready).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from app.config import Settings, get_settings
from ingest.embedder import Encoder, SentenceTransformerEncoder, model_id_for
from ingest.onnx_encoder import (
    EncoderArtifactError,
    EncoderStatesError,
    OnnxEncoder,
    encoder_dir,
    read_manifest,
    states_model,
)

log = logging.getLogger(__name__)

EncoderFactory = Callable[[Settings], Encoder]


def default_encoder(settings: Settings) -> Encoder:
    """The serving encoder: the int8 ONNX export when there is one (or when asked), else PyTorch.

    The ONNX path imports neither torch nor sentence-transformers.
    """
    if settings.encoder_backend != "torch":
        model_id = model_id_for(settings.model)
        try:
            _, threads = settings.encoder_parallelism
            folder, layer = encoder_dir(settings.index_path, model_id), judge_states_layer(
                settings.late_judge_dir, settings.judge_dir)
            try:
                return OnnxEncoder(folder, model_id, threads=threads, solo_threads=settings.encoder_solo,
                                   states_layer=layer)
            except EncoderStatesError:
                # An export without that layer (another model's): served, and graded without the late judge.
                log.warning("the ONNX export has no layer-%s states: serving it without the late judge", layer)
                return OnnxEncoder(folder, model_id, threads=threads, solo_threads=settings.encoder_solo)
        except EncoderArtifactError:
            if settings.encoder_backend == "onnx":
                raise
            log.warning("no ONNX export for %s; serving with PyTorch (run `tutor models export`)", model_id)
    return SentenceTransformerEncoder(settings.model)


def keep_states_model(settings: Settings, folder: Path) -> None:
    """Derive the export's states model for the configured late judge now (`tutor models export`, `tutor
    ingest`), so that the service's start finds it (ingest/onnx_encoder.py: states_model)."""
    layer = judge_states_layer(settings.late_judge_dir, settings.judge_dir)
    if layer is None:
        return
    try:
        states_model(folder, read_manifest(folder), layer)
    except EncoderStatesError:
        log.warning("the ONNX export has no layer-%s states: it will be served without the late judge", layer)


def judge_states_layer(*judge_dirs: Path) -> int | None:
    """The encoder layer whose token states the grader's judges read: the first of these folders' judges
    whose manifest has a `states_layer` (a late judge, app/grading/latejudge.py), else None. Read without
    checking the judges: loading them does."""
    for judge_dir in judge_dirs:
        try:
            layer = json.loads((judge_dir / "judge.json").read_text(encoding="utf-8")).get("states_layer")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(layer, int):
            return layer
    return None


# What `build_early` started: the settings it was for, and the encoder to come.
_early: tuple[Settings, Future[Encoder]] | None = None


def build_early() -> None:
    """Start building `default_encoder(get_settings())` on a thread, for `serving_encoder` to take."""
    global _early
    settings = get_settings()
    built: Future[Encoder] = Future()

    def build() -> None:
        try:
            built.set_result(default_encoder(settings))
        except BaseException as exc:  # handed to whoever takes the encoder
            built.set_exception(exc)

    threading.Thread(target=build, name="tutor-encoder-early", daemon=True).start()
    _early = settings, built


def serving_encoder(settings: Settings) -> Encoder:
    """`default_encoder`, or the one `build_early` started for the same settings (handed over once).

    Waits for that build, and raises what it raised.
    """
    global _early
    early, _early = _early, None
    if early is None or early[0] != settings:
        return default_encoder(settings)
    return early[1].result()
