"""The embedding cache: vectors keyed by model and text hash, stored in the database.

Two kinds of texts go through it. The bank's (questions, answers, passages) are embedded at ingestion
and kept in the database for good: serving rebuilds every rubric from them without the model. Texts that
clients send with a question of their own (an inline question of POST /v1/grade, a rubric registered with
POST /v1/rubrics) are kept apart (`InlineVectorCache`) and only for a while: a row cap and a time to live
bound them in the database, as the LRU and TTL caches in front bound every vector in process memory.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta

import numpy as np
from cachetools import Cache, LRUCache, TTLCache
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from app.db import on_conflict_insert, transaction
from app.models import Embedding, utcnow
from ingest.embedder import Encoder
from ingest.identity import text_hash

BATCH = 64
_CHUNK = 500  # keeps IN (...) lists well under database parameter limits

MEMORY_ENTRIES = 4096
"""Vectors a `VectorCache` keeps in process memory, least recently used dropped first: about 6 MB at 384
dimensions. The bank's rubrics are built once from them at start-up and kept whole, so this only saves a
read when one rubric is rebuilt; the database keeps every bank vector."""

INLINE_MEMORY_ENTRIES = 2048
"""Vectors of clients' own texts kept in process memory (least recently used dropped first, and none
longer than `INLINE_TTL_S`): about 3 MB at 384 dimensions."""

INLINE_TTL_S = 7 * 24 * 3600.0
"""How long a client text's vector is kept, in memory and in the database (a week, from when it was
embedded): a question a client grades against every day stays cached; one sent once is forgotten."""

INLINE_MAX_ROWS = 50_000
"""The most rows of clients' vectors the database keeps per model, the oldest deleted first: about 80 MB of
table at 384 dimensions (each process may add up to `INLINE_PRUNE_EVERY` more before it next prunes)."""

INLINE_PRUNE_EVERY = 256
"""A process prunes clients' vectors (expired rows, then rows past the cap) with its first write of them
and then after every this many rows written: the count and deletes cost a scan of those rows, which a
write per request would pay every time."""

_MODEL_ID_MAX = 128  # the length of embeddings.model_id
_INLINE_SUFFIX = "#inline"


def _chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class VectorCache:
    """Read and fill the cache for one model; at most `memory` vectors are also held in process memory.

    Thread-safe: the serving process prepares rubrics on several worker threads through one cache.
    """

    def __init__(self, factory: sessionmaker[Session], model_id: str, memory: int = MEMORY_ENTRIES) -> None:
        self.factory = factory
        self.model_id = model_id
        self.store_id = model_id  # the `model_id` its rows are stored under
        self._vectors: Cache[str, np.ndarray] = self._memory(memory)
        self._lock = threading.Lock()  # cachetools' caches are not thread-safe

    def _memory(self, size: int) -> Cache[str, np.ndarray]:
        return LRUCache(maxsize=size)

    def __len__(self) -> int:
        """Vectors held in process memory now."""
        with self._lock:
            return len(self._vectors)

    def _recall(self, hashes: Iterable[str]) -> dict[str, np.ndarray]:
        """The vectors in process memory among these hashes (each counts as used)."""
        out: dict[str, np.ndarray] = {}
        with self._lock:
            for digest in hashes:
                vec = self._vectors.get(digest)
                if vec is not None:
                    out[digest] = vec
        return out

    def _remember(self, found: dict[str, np.ndarray]) -> None:
        with self._lock:
            for digest, vec in found.items():
                self._vectors[digest] = vec

    def _read_ids(self) -> list[str]:
        """The `model_id`s whose rows this cache reads."""
        return [self.store_id]

    def _load(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        ids = self._read_ids()
        where = Embedding.model_id == ids[0] if len(ids) == 1 else Embedding.model_id.in_(ids)
        with transaction(self.factory) as session:
            for chunk in _chunks(hashes, _CHUNK):
                rows = session.execute(
                    select(Embedding.text_hash, Embedding.vector).where(where, Embedding.text_hash.in_(chunk))
                )
                for digest, blob in rows:
                    found[digest] = np.frombuffer(blob, dtype=np.float32)
        return found

    def _vectors_of(self, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors among these hashes: from memory, else read (and then held in memory)."""
        found = self._recall(hashes)
        lacking = [h for h in hashes if h not in found]
        if lacking:
            loaded = self._load(lacking)
            self._remember(loaded)
            found.update(loaded)
        return found

    def _ensure(
        self,
        texts: Sequence[str],
        encoder: Callable[[], Encoder],
        progress: Callable[[str, int, int], None] | None = None,
    ) -> tuple[dict[str, np.ndarray], int]:
        """Every text's vector by hash, embedding (in batches) and storing those the cache lacks; and how many
        were embedded. The vectors are returned, not only cached: memory may not hold all of them."""
        unique = list(dict.fromkeys(texts))
        by_hash = {text_hash(t): t for t in unique}
        found = self._vectors_of(list(by_hash))
        missing = [t for h, t in by_hash.items() if h not in found]
        if not missing:
            return found, 0
        enc = encoder()
        rows: list[dict[str, object]] = []
        embedded: dict[str, np.ndarray] = {}
        for i, batch in enumerate(_chunks(missing, BATCH)):
            vectors = enc.encode(list(batch))
            for text, vec in zip(batch, vectors, strict=True):
                digest = text_hash(text)
                embedded[digest] = np.asarray(vec, dtype=np.float32)
                rows.append(
                    {
                        "model_id": self.store_id,
                        "text_hash": digest,
                        "dim": len(vec),
                        "vector": embedded[digest].tobytes(),
                    }
                )
            if progress:
                progress("embed", min((i + 1) * BATCH, len(missing)), len(missing))
        self._store(rows)
        self._remember(embedded)
        found.update(embedded)
        return found, len(missing)

    def _store(self, rows: list[dict[str, object]]) -> None:
        # Two requests preparing the same new text (an inline question sent twice at once) both
        # embed it; the vector is the same, so the second insert of a row is simply skipped.
        with transaction(self.factory) as session:
            stmt = on_conflict_insert(session, Embedding).on_conflict_do_nothing(
                index_elements=[Embedding.model_id, Embedding.text_hash]
            )
            session.connection().execute(stmt, rows)

    def ensure(
        self,
        texts: Sequence[str],
        encoder: Callable[[], Encoder],
        progress: Callable[[str, int, int], None] | None = None,
    ) -> int:
        """Embed the texts the cache lacks, in batches; return how many were embedded."""
        return self._ensure(texts, encoder, progress)[1]

    def get_many(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors for texts already in the cache, keyed by text."""
        wanted = {text_hash(t): t for t in texts}
        found = self._vectors_of(list(wanted))
        return {t: found[h] for h, t in wanted.items() if h in found}

    def dim(self, encoder: Callable[[], Encoder]) -> int:
        """The model's dimension, for an empty bank."""
        return encoder().dim


def inline_store_id(model_id: str) -> str:
    """The `model_id` under which clients' vectors of a model are stored, apart from the bank's."""
    store_id = model_id + _INLINE_SUFFIX
    if len(store_id) > _MODEL_ID_MAX:
        store_id = hashlib.sha256(model_id.encode()).hexdigest() + _INLINE_SUFFIX
    return store_id


class InlineVectorCache(VectorCache):
    """The cache of texts that clients send with their own questions, bounded in memory and in the database.

    Reads a text's vector from the bank's rows first (a client's reference answer may be a bank text),
    then from its own; stores what it embeds under `inline_store_id(model_id)`, and prunes those rows when it
    writes: first the ones older than `ttl_s`, then the oldest past `max_rows`. A vector pruned, or pushed
    out of memory, is embedded again the next time it is needed. Bounds left as None take the module's
    `INLINE_*` values as they are when the cache is made.
    """

    def __init__(
        self,
        factory: sessionmaker[Session],
        model_id: str,
        *,
        memory: int | None = None,
        ttl_s: float | None = None,
        max_rows: int | None = None,
        prune_every: int | None = None,
    ) -> None:
        self.ttl_s = INLINE_TTL_S if ttl_s is None else ttl_s
        self.max_rows = INLINE_MAX_ROWS if max_rows is None else max_rows
        self.prune_every = INLINE_PRUNE_EVERY if prune_every is None else prune_every
        super().__init__(factory, model_id, INLINE_MEMORY_ENTRIES if memory is None else memory)
        self.store_id = inline_store_id(model_id)
        self._unpruned: int | None = None  # rows written since the last prune (None: not pruned yet)

    def _memory(self, size: int) -> Cache[str, np.ndarray]:
        return TTLCache(maxsize=size, ttl=self.ttl_s)

    def _read_ids(self) -> list[str]:
        return [self.model_id, self.store_id]

    def _store(self, rows: list[dict[str, object]]) -> None:
        super()._store(rows)
        with self._lock:
            written = (self._unpruned or 0) + len(rows)
            due = self._unpruned is None or written >= self.prune_every
            self._unpruned = 0 if due else written
        if due:
            self.prune()

    def prune(self) -> int:
        """Delete this model's client vectors older than `ttl_s`, then the oldest past `max_rows`; how many went."""
        mine = Embedding.model_id == self.store_id
        with transaction(self.factory) as session:
            conn = session.connection()
            expired = conn.execute(
                delete(Embedding).where(mine, Embedding.created_at < utcnow() - timedelta(seconds=self.ttl_s))
            ).rowcount
            kept = int(conn.scalar(select(func.count()).select_from(Embedding).where(mine)) or 0)
            over = 0
            if kept > self.max_rows:
                oldest = (
                    select(Embedding.text_hash)
                    .where(mine)
                    .order_by(Embedding.created_at, Embedding.text_hash)
                    .limit(kept - self.max_rows)
                )
                over = conn.execute(delete(Embedding).where(mine, Embedding.text_hash.in_(oldest))).rowcount
        return max(expired, 0) + max(over, 0)


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
        self._inline: CachedEncoder | None = None
        self._lock = threading.Lock()

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
        found, embedded = self.cache._ensure(texts, self._encoder)
        self.embedded += embedded
        rows = np.stack([found[text_hash(t)] for t in texts])
        self._dim = rows.shape[1]
        return rows

    def inline(self) -> CachedEncoder:
        """The same model through an `InlineVectorCache`: for the texts of clients' own questions (made once)."""
        with self._lock:
            if self._inline is None:
                cache = InlineVectorCache(self.cache.factory, self.model_id)
                self._inline = CachedEncoder(cache, self._encoder, self._dim)
            return self._inline
