"""The serving encoder: the int8 ONNX export of the model, run with onnxruntime (no torch import)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ENCODER_MANIFEST = "encoder.json"
ONNX_FILE = "model-int8.onnx"


class EncoderArtifactError(RuntimeError):
    """The exported encoder is missing or does not belong to the configured model."""


def encoder_dir(index_root: Path, model_id: str) -> Path:
    """Where the exported encoder of a model lives, beside the index."""
    safe = model_id.replace("/", "__").replace("@", "-")
    return index_root / "encoders" / safe


def read_manifest(folder: Path) -> dict[str, object]:
    """The export's manifest (source model id, file hash, checks)."""
    try:
        data: dict[str, object] = json.loads((folder / ENCODER_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EncoderArtifactError(
            f"no exported ONNX encoder in {folder}; run `tutor models export` (or `tutor ingest`)"
        ) from exc
    return data


class OnnxEncoder:
    """Tokenise with the model's fast tokenizer (padding to the longest in the batch), run int8 ONNX."""

    def __init__(self, folder: Path, model_id: str, threads: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        manifest = read_manifest(folder)
        if manifest.get("model_id") != model_id:
            raise EncoderArtifactError(
                f"exported encoder in {folder} is for {manifest.get('model_id')}, not {model_id}; "
                "run `tutor models export`"
            )
        self.model_id = model_id
        self.dim = int(manifest["dim"])  # type: ignore[call-overload]
        self.max_length = int(manifest.get("max_length", 256))  # type: ignore[call-overload]
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # The shipped tokenizer.json pads every input to 128 tokens; pad to the batch's longest instead.
        tokenizer.no_padding()
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        tokenizer.enable_truncation(max_length=self.max_length)
        self._tokenizer = tokenizer
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or min(4, os.cpu_count() or 1)
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(str(folder / ONNX_FILE), options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Mean-pooled, L2-normalised sentence vectors."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        batch = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in batch], dtype=np.int64)
        mask = np.array([e.attention_mask for e in batch], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        with self._lock:
            (hidden,) = self._session.run(["last_hidden_state"], feeds)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
