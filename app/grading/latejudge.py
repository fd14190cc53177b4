"""The late judge: the pair judge's three probabilities from the encoder's own token states.

The pair judge (pairjudge.py) reads the accepted answer, the question and the answer as one input, a
second transformer pass that costs several encodes of the answer. This judge reads the two texts
apart through the serving encoder's first layers, as that encoder computes them anyway: the answer's
states are one more output of the encode the grader already runs, and an accepted answer's are
computed once and kept. Only MiniLM's last layers, fine-tuned, read the two together
(`tutor models train-judge --late`, grading_lab/late_judge.py), served as int8 ONNX. Its input is
the int8 encoder's states, as it was trained: the manifest names the encoder layer it reads and the
encoder export it was trained on.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from app.grading.pairjudge import JUDGE_LABELS, MANIFEST, ONNX_FILE, JudgeArtifactError, pair_text
from ingest.identity import file_sha256
from ingest.onnx_encoder import cpu_session

log = logging.getLogger(__name__)

KIND = "late"  # the manifest's `kind` for this judge (the pair judge's manifests have none)
FIRST_MAX = 128  # tokens of the accepted answer and question, read alone
FIRSTS_KEPT = 512  # accepted answers (with their question) whose states the judge keeps


class LayerStates(Protocol):
    """An encoder that gives a text's token states after one of its layers (ingest/onnx_encoder.py)."""

    states_layer: int | None
    onnx_sha256: str  # the export's model file, which the judge was trained on

    def layer_states(self, texts: Sequence[str], max_length: int | None = None) -> list[np.ndarray]: ...


def is_late(folder: Path) -> bool:
    """Whether the judge in a folder is a late judge (False when it has no readable manifest)."""
    try:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8")).get("kind") == KIND
    except (OSError, ValueError, AttributeError):
        return False


def read_late_manifest(folder: Path) -> dict[str, Any]:
    """The late judge's manifest, after checking its model against the manifest's hash."""
    try:
        manifest: dict[str, Any] = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise JudgeArtifactError(f"no judge in {folder.name}/ (run `tutor models train-judge`)") from exc
    if manifest.get("kind") != KIND:
        raise JudgeArtifactError(f"the judge in {folder.name}/ is not a late judge")
    if not (folder / ONNX_FILE).is_file():
        raise JudgeArtifactError(f"the late judge's {ONNX_FILE} is missing")
    if file_sha256(folder / ONNX_FILE) != manifest.get("onnx_sha256"):
        raise JudgeArtifactError(f"the late judge's {ONNX_FILE} does not match its manifest (damaged or replaced)")
    if tuple(manifest.get("labels", ())) != JUDGE_LABELS:
        raise JudgeArtifactError(f"the late judge's labels {manifest.get('labels')} are not {JUDGE_LABELS}")
    return manifest


class LateJudge:
    """P(correct), P(partial), P(incorrect) of answers, each read with one accepted answer, from the
    encoder's states after `states_layer` (the manifest's) through the judge's own upper layers."""

    def __init__(self, folder: Path, encoder: LayerStates, threads: int | None = None,
                 manifest: dict[str, Any] | None = None) -> None:
        """`manifest`: the folder's, as `read_late_manifest` just checked it (else it is read and checked here)."""
        self.manifest = manifest if manifest is not None else read_late_manifest(folder)
        self.states_layer = int(self.manifest["states_layer"])
        if encoder.states_layer != self.states_layer:
            raise JudgeArtifactError(f"the late judge reads encoder layer {self.states_layer}; "
                                     f"the encoder keeps {encoder.states_layer}")
        trained_on = self.manifest.get("encoder", {}).get("onnx_sha256")
        if trained_on and trained_on != encoder.onnx_sha256:
            log.warning("the late judge was trained on another export of the encoder (%s, not %s): its readings "
                        "may drift; retrain it (`tutor models train-judge --late`)", trained_on[:12],
                        encoder.onnx_sha256[:12])
        self.version = f"{self.manifest['recipe']['version']}@{self.manifest['onnx_sha256'][:12]}"
        self.with_question = bool(self.manifest["recipe"].get("question", True))
        self.first_max = int(self.manifest.get("first_max", FIRST_MAX))
        self._encoder = encoder
        self._firsts: OrderedDict[str, np.ndarray] = OrderedDict()  # float16: about 35 KB per text
        self._lock = threading.Lock()
        self._session = cpu_session(folder / ONNX_FILE, threads or min(4, os.cpu_count() or 1))

    def probabilities(self, triples: Sequence[tuple[str, str, str]]) -> np.ndarray:
        """One row of JUDGE_LABELS probabilities per (question, accepted answer, answer).

        Each pair is its own run, never padded beside another (int8 activations are scaled over a
        run), and the answer's states are its own encode's: a pair's reading does not depend on what
        was read with it (tests/app/grading/test_latejudge.py).
        """
        out = np.zeros((len(triples), len(JUDGE_LABELS)), dtype=np.float32)
        answers = self._encoder.layer_states(list(dict.fromkeys(a for _, _, a in triples)))
        of = dict(zip(dict.fromkeys(a for _, _, a in triples), answers, strict=True))
        for row, (q, r, a) in enumerate(triples):
            first = self._first(pair_text(q, r, self.with_question))
            logits = self._session.run(None, {"first": first[None], "answer": of[a][None]})[0][0]
            shifted = np.exp(logits - logits.max())
            out[row] = shifted / shifted.sum()
        return out

    def _first(self, text: str) -> np.ndarray:
        """The states of an accepted answer with its question: kept (as float16) once read."""
        with self._lock:
            kept = self._firsts.get(text)
            if kept is not None:
                self._firsts.move_to_end(text)
        if kept is None:
            kept = self._encoder.layer_states([text], self.first_max)[0].astype(np.float16)
            with self._lock:
                self._firsts[text] = kept
                while len(self._firsts) > FIRSTS_KEPT:
                    self._firsts.popitem(last=False)
        return kept.astype(np.float32)
