"""The embedding cache: vectors keyed by model and text hash, stored in the database."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db import on_conflict_insert, transaction
from app.models import Embedding
from ingest.embedder import Encoder
from ingest.identity import text_hash

BATCH = 64
_CHUNK = 500  # keeps IN (...) lists well under database parameter limits


def _chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class VectorCache:
    """Read and fill the cache for one model."""

    def __init__(self, factory: sessionmaker[Session], model_id: str) -> None:
        self.factory = factory
        self.model_id = model_id
        self._vectors: dict[str, np.ndarray] = {}

    def _load(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with transaction(self.factory) as session:
            for chunk in _chunks(hashes, _CHUNK):
                rows = session.execute(
                    select(Embedding.text_hash, Embedding.vector).where(
                        Embedding.model_id == self.model_id, Embedding.text_hash.in_(chunk)
                    )
                )
                for digest, blob in rows:
                    found[digest] = np.frombuffer(blob, dtype=np.float32)
        return found

    def ensure(
        self,
        texts: Sequence[str],
        encoder: Callable[[], Encoder],
        progress: Callable[[str, int, int], None] | None = None,
    ) -> int:
        """Embed the texts the cache lacks, in batches; return how many were embedded."""
        unique = list(dict.fromkeys(texts))
        by_hash = {text_hash(t): t for t in unique}
        self._vectors.update(self._load(list(by_hash)))
        missing = [t for h, t in by_hash.items() if h not in self._vectors]
        if not missing:
            return 0
        enc = encoder()
        rows: list[dict[str, object]] = []
        for i, batch in enumerate(_chunks(missing, BATCH)):
            vectors = enc.encode(list(batch))
            for text, vec in zip(batch, vectors, strict=True):
                digest = text_hash(text)
                self._vectors[digest] = np.asarray(vec, dtype=np.float32)
                rows.append(
                    {
                        "model_id": self.model_id,
                        "text_hash": digest,
                        "dim": len(vec),
                        "vector": np.asarray(vec, dtype=np.float32).tobytes(),
                    }
                )
            if progress:
                progress("embed", min((i + 1) * BATCH, len(missing)), len(missing))
        # Two requests preparing the same new text (an inline question sent twice at once) both
        # embed it; the vector is the same, so the second insert of a row is simply skipped.
        with transaction(self.factory) as session:
            stmt = on_conflict_insert(session, Embedding).on_conflict_do_nothing(
                index_elements=[Embedding.model_id, Embedding.text_hash]
            )
            session.connection().execute(stmt, rows)
        return len(missing)

    def get_many(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors for texts already in the cache, keyed by text."""
        wanted = {text_hash(t): t for t in texts}
        lacking = [h for h in wanted if h not in self._vectors]
        if lacking:
            self._vectors.update(self._load(lacking))
        return {t: self._vectors[h] for h, t in wanted.items() if h in self._vectors}

    def dim(self, encoder: Callable[[], Encoder]) -> int:
        """The model's dimension, for an empty bank."""
        return encoder().dim


class CachedEncoder:
    """An Encoder that answers from the cache and embeds (and caches) only what it lacks.

    Grading rubrics are built through it: at ingestion it fills the cache, and at start-up
    the service rebuilds every rubric from the cache without calling the model.
    """

    def __init__(self, cache: VectorCache, encoder: Callable[[], Encoder], dim: int | None = None) -> None:
        self.cache = cache
        self._encoder = encoder
        self.model_id = cache.model_id
        self._dim = dim
        self.embedded = 0

    @property
    def dim(self) -> int:
        """The vector size (asks the model only when no vector is cached yet)."""
        if self._dim is None:
            self._dim = self._encoder().dim
        return self._dim

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for the texts, in order; cache misses are embedded in one batch and stored."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.embedded += self.cache.ensure(texts, self._encoder)
        found = self.cache.get_many(texts)
        rows = np.stack([found[t] for t in texts])
        self._dim = rows.shape[1]
        return rows
