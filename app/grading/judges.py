"""Which judges grading reads pairs with: the one a folder holds, a pair judge or a late judge; and the
late judge whose readings the bank decision weighs beside the pair judge's.

Both give P(correct), P(partial), P(incorrect) for (question, accepted answer, answer) triples. The
folder's manifest says which it is (a late judge's `kind` is "late"). A late judge reads the serving
encoder's states: the runtime hands it its own encoder, so that an answer's states come from the
encode the grader runs anyway; without one (offline work, tests) it builds an int8 encoder of its own
from the index's export.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from app.config import Settings
from app.grading.latejudge import LateJudge, LayerStates, is_late, read_late_manifest
from app.grading.pairjudge import JudgeArtifactError, PairJudge

log = logging.getLogger(__name__)


class Judge(Protocol):
    """What grading needs of a judge."""

    manifest: dict[str, Any]
    version: str

    def probabilities(self, triples: Sequence[tuple[str, str, str]]) -> np.ndarray: ...


def states_source(encoder: object) -> LayerStates | None:
    """The encoder below `encoder`'s wrappers (micro-batcher, caches: their `inner`) that keeps layer states."""
    seen = 0
    while encoder is not None and seen < 8:
        if getattr(encoder, "states_layer", None) is not None and hasattr(encoder, "layer_states"):
            return encoder  # type: ignore[return-value]
        encoder, seen = getattr(encoder, "inner", None), seen + 1
    return None


def own_encoder(states_layer: int, settings: Settings | None = None) -> LayerStates:
    """An int8 encoder of the index's export that keeps `states_layer`'s states (for a late judge read offline)."""
    from ingest.embedder import model_id_for
    from ingest.onnx_encoder import EncoderArtifactError, OnnxEncoder, encoder_dir

    settings = settings or Settings()
    model_id = model_id_for(settings.model)
    try:
        return OnnxEncoder(encoder_dir(settings.index_path, model_id), model_id, states_layer=states_layer)
    except EncoderArtifactError as exc:
        raise JudgeArtifactError(f"the late judge reads the int8 encoder's states: {exc}") from exc


def load_judge(folder: Path, encoder: object | None = None) -> Judge:
    """The judge in a folder. A late judge reads `encoder`'s states when it keeps the judge's layer,
    or else those of an int8 encoder of its own (a second encode of each answer: logged, since a
    serving encoder that keeps none is the PyTorch fallback or a test's)."""
    if not is_late(folder):
        return _pair_judge(folder)
    source = states_source(encoder)
    layer = int(read_late_manifest(folder)["states_layer"])
    if source is None or source.states_layer != layer:
        if encoder is not None:
            log.warning("the serving encoder keeps no layer-%d states; the late judge encodes answers again", layer)
        return _offline_late_judge(folder)
    return LateJudge(folder, source)


@lru_cache(maxsize=2)
def _pair_judge(folder: Path) -> PairJudge:
    return PairJudge(folder)


@lru_cache(maxsize=2)
def _offline_late_judge(folder: Path, index_path: Path | None = None, model: str | None = None) -> LateJudge:
    settings = Settings() if index_path is None else Settings(index_dir=index_path, model=model or Settings().model)
    return LateJudge(folder, own_encoder(int(read_late_manifest(folder)["states_layer"]), settings))


_configured: list[Judge] = []  # the process's judge, once chosen


def use_judge(judge: Judge) -> None:
    """Make this the judge that grading uses when it is given none (the runtime's, when it loads)."""
    _configured[:] = [judge]


def default_judge() -> Judge:
    """The process's judge: the runtime's, or else the one `TUTOR_JUDGE_DIR` names (by default the
    committed models/judge/), read once. Grading never reads the settings itself."""
    if not _configured:
        use_judge(load_judge(Settings().judge_dir))
    return _configured[0]


_late: list[Judge | None] = []  # the process's late judge for the bank decision, once chosen (None: none)


def use_late_judge(judge: Judge | None) -> None:
    """Make this the late judge that grading reads bank questions' answers with (None: grade without one)."""
    _late[:] = [judge]


def default_late_judge() -> Judge | None:
    """The process's late judge: the runtime's, or one an offline tool chose (`use_late_judge`). None
    until one is chosen: a late judge reads the int8 encoder's states, which an offline encoder (PyTorch,
    a test's fake) does not have, so offline grading opts in (`offline_late_judge`)."""
    return _late[0] if _late else None


def serving_late_judge(folder: Path, encoder: object) -> Judge | None:
    """The late judge in `folder`, reading `encoder`'s states; None (logged) when that encoder keeps none
    of its layer (the PyTorch fallback, a test's fake): grading then weighs the pair judge alone. A
    damaged or missing judge raises, whatever the encoder."""
    manifest = read_late_manifest(folder)
    layer = int(manifest["states_layer"])
    source = states_source(encoder)
    if source is None or source.states_layer != layer:
        log.warning("the serving encoder keeps no layer-%d states: grading without the late judge", layer)
        return None
    return LateJudge(folder, source, manifest=manifest)


def offline_late_judge(settings: Settings | None = None) -> Judge:
    """The configured late judge with an int8 encoder of its own (the index's export), for offline grading
    as served (`tutor eval`, the decision's fit)."""
    settings = settings or Settings()
    return _offline_late_judge(settings.late_judge_dir, settings.index_path, settings.model)
