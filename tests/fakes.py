"""Test doubles: a deterministic fake encoder so unit tests need no model weights."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

_WORD = re.compile(r"[a-z0-9]+")


class FakeEncoder:
    """Hashed bag of words (plus character trigrams): texts sharing words get similar vectors."""

    def __init__(self, dim: int = 256, model_id: str = "fake-bow@0") -> None:
        self.dim = dim
        self.model_id = model_id
        self.calls: list[int] = []  # batch sizes, so tests can count encoder calls
        self.texts: list[str] = []  # every text encoded, in order

    def _bucket(self, token: str) -> int:
        return int.from_bytes(hashlib.blake2b(token.encode(), digest_size=4).digest(), "little") % self.dim

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Encode texts deterministically; every call is recorded in `calls`."""
        self.calls.append(len(texts))
        self.texts.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            for word in words:
                out[row, self._bucket("w:" + word)] += 1.0
                for i in range(max(1, len(word) - 2)):
                    out[row, self._bucket("c:" + word[i : i + 3])] += 0.3
            if not words:
                out[row, 0] = 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)
