"""The FAISS vector index over questions, accepted answers, explanations and note passages, with its manifest.

Each index version lives in its own folder `v-<hash>/` (index.faiss + manifest.json), written to
a temporary folder and renamed into place. The database records which version is live, in the
same transaction as the bank, so a crash at any point leaves a bank and an index that match.

The manifest records the SHA-256 of index.faiss and of its own content; both are checked when the
index is loaded, so a damaged or edited file keeps the service from saying it is ready instead of
serving wrong passages. The checks' messages name no server path (they reach clients as the reason
the service is not ready); the folder is logged.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from contracts.errors import UnavailableError
from ingest.identity import file_sha256

log = logging.getLogger(__name__)

FORMAT = 1
# The bank-state rows (app.models.BankState) that name the live index and its model.
INDEX_VERSION_KEY = "index_version"
INDEX_MODEL_KEY = "index_model"
INDEX_FILE = "index.faiss"
MANIFEST_FILE = "manifest.json"


class IndexDamagedError(RuntimeError):
    """The index is missing, damaged, or does not match the configured model; the message says what to do
    (and names no server path: it is the reason /readyz gives)."""


class IndexSearchError(UnavailableError):
    """A search of a loaded index failed: a 503 in the project's error shape; the cause goes to the log only."""

    def __init__(self) -> None:
        super().__init__("the search index could not answer; try again shortly")


PASSAGE = "passage"
ASK = "ask"  # a question a passage's section answers, as a learner words it (the note's `asks`)


@dataclass(frozen=True)
class IndexEntry:
    """What one vector stands for: a question and which of its texts, or a study-note passage.

    A passage's entry has no question (`question_id` None), kind "passage" and its `passage_id`; an
    authored question that a passage answers has kind "ask" and that passage's id.
    """

    question_id: str | None
    kind: str  # "question" | "answer" | "explanation" | "passage" | "ask"
    text_hash: str
    passage_id: str | None = None

    def as_row(self) -> list[str | None]:
        """The manifest's row: [question id, kind, text hash], and the passage id for a passage."""
        row = [self.question_id, self.kind, self.text_hash]
        return row if self.passage_id is None else [*row, self.passage_id]


@dataclass
class LoadedIndex:
    """An index in memory with its entries and manifest."""

    index: Any
    entries: list[IndexEntry]
    manifest: dict[str, Any]
    version: str
    _by_question: dict[str, list[int]] = field(default_factory=dict, repr=False)

    def positions_of(self, question_id: str) -> list[int]:
        """Where a question's vectors sit in the index."""
        if not self._by_question and self.entries:
            for pos, entry in enumerate(self.entries):
                if entry.question_id is not None:
                    self._by_question.setdefault(entry.question_id, []).append(pos)
        return self._by_question.get(question_id, [])

    def vectors_at(self, positions: list[int]) -> np.ndarray:
        """The stored vectors at the given positions."""
        try:
            return np.stack([self.index.reconstruct(int(p)) for p in positions])
        except Exception as exc:  # FAISS's message names its source files and ours: the log keeps it
            log.error("index %s: reconstruct failed: %s", self.version[:16], exc)
            raise IndexSearchError() from exc

    def search(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Inner-product (cosine) search; returns (scores, positions) with -1 for no hit."""
        if not self.entries:
            n = len(vectors)
            return np.zeros((n, 0), dtype=np.float32), np.zeros((n, 0), dtype=np.int64)
        try:
            scores, ids = self.index.search(np.ascontiguousarray(vectors, dtype=np.float32),
                                            min(k, len(self.entries)))
        except Exception as exc:  # as in vectors_at
            log.error("index %s: search failed: %s", self.version[:16], exc)
            raise IndexSearchError() from exc
        return scores, ids


def index_version(model_id: str, dim: int, entries: list[IndexEntry], extra: str = "") -> str:
    """A content hash of everything the index holds: model, entries and their texts.

    `extra` is folded in when given: a digest of what is served with the index but not embedded
    (the note passages' citations and which questions they explain), so that a change to it is
    a new version too, and caches keyed by version are refreshed.
    """
    digest = hashlib.sha256(f"{FORMAT}\n{model_id}\n{dim}\n".encode())
    for e in entries:
        if e.passage_id is None:
            digest.update(f"{e.question_id}\t{e.kind}\t{e.text_hash}\n".encode())
        else:
            digest.update(f"\t{e.kind}\t{e.text_hash}\t{e.passage_id}\n".encode())
    if extra:
        digest.update(f"extra\t{extra}\n".encode())
    return digest.hexdigest()


MANIFEST_HASH = "manifest_sha256"  # the manifest's hash of its own content (every other key)
INDEX_HASH = "index_sha256"  # the manifest's hash of index.faiss


def manifest_digest(manifest: dict[str, Any]) -> str:
    """The SHA-256 of a manifest's content without its own hash (canonical JSON: sorted keys, no spaces)."""
    body = {k: v for k, v in manifest.items() if k != MANIFEST_HASH}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def seal_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest with its own hash recorded in it."""
    return {**manifest, MANIFEST_HASH: manifest_digest(manifest)}


def _refuse(folder: Path, message: str) -> IndexDamagedError:
    """The error for a refused index version: the message for clients, the folder in the log."""
    log.warning("index folder %s: %s", folder, message)
    return IndexDamagedError(message)


def verified_manifest(folder: Path, version: str) -> dict[str, Any]:
    """An index version's manifest, after checking it and index.faiss against the hashes it records.

    Costs one read of index.faiss and one pass over the manifest: about 25 ms for 20 000 vectors of
    384 dimensions (31 MB), against about 25 ms for FAISS to read the index.
    """
    name = version[:16]
    try:
        manifest: dict[str, Any] = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _refuse(folder, f"index version {name} is missing or unreadable; run `tutor ingest`") from exc
    if not isinstance(manifest, dict) or MANIFEST_HASH not in manifest or INDEX_HASH not in manifest:
        raise _refuse(folder, f"index version {name} records no checksums (written by an older version); "
                              "run `tutor ingest`")
    if manifest_digest(manifest) != manifest[MANIFEST_HASH]:
        raise _refuse(folder, f"the manifest of index version {name} does not match its checksum "
                              "(damaged or edited); run `tutor ingest`")
    try:
        actual = file_sha256(folder / INDEX_FILE)
    except OSError as exc:
        raise _refuse(folder, f"the index file of version {name} is missing or unreadable; run `tutor ingest`") from exc
    if actual != manifest[INDEX_HASH]:
        raise _refuse(folder, f"the index file of version {name} does not match its manifest "
                              "(damaged or replaced); run `tutor ingest`")
    return manifest


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_index(
    root: Path,
    model_id: str,
    dim: int,
    entries: list[IndexEntry],
    vectors: np.ndarray,
    exact_up_to: int | None = None,
    extra: str = "",
) -> str:
    """Write an index version atomically unless it already exists whole; return its version.

    A version whose files fail their checks (damaged, or written before the manifest recorded
    hashes) is written again.
    """
    version = index_version(model_id, dim, entries, extra)
    final = root / f"v-{version[:16]}"
    if (final / MANIFEST_FILE).exists():
        try:
            verified_manifest(final, version)
            return version
        except IndexDamagedError:
            log.warning("index version %s failed its checks; writing it again", version[:16])
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
    tmp.chmod(0o755)
    try:
        matrix = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, dim)
        index, info = build_index(dim, matrix, EXACT_UP_TO if exact_up_to is None else exact_up_to)
        faiss.write_index(index, str(tmp / INDEX_FILE))
        manifest = seal_manifest({
            "format": FORMAT,
            "model_id": model_id,
            "dim": dim,
            "count": len(entries),
            "content_hash": version,
            **info,
            INDEX_HASH: file_sha256(tmp / INDEX_FILE),
            "entries": [e.as_row() for e in entries],
        })
        (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        for name in (INDEX_FILE, MANIFEST_FILE):
            with open(tmp / name, "rb") as fh:
                os.fsync(fh.fileno())
        if final.exists():  # a half-removed leftover without a manifest
            shutil.rmtree(final)
        os.replace(tmp, final)
        _fsync_dir(root)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return version


EXACT_UP_TO = 20_000  # exact search is fast enough below this; above it, HNSW
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
RECALL_TARGET = 0.95
RECALL_QUERIES = 200


def recall_at_10(index: Any, vectors: np.ndarray, queries: np.ndarray) -> float:
    """Share of the exact top-10 (by inner product) that the index also returns."""
    exact = faiss.IndexFlatIP(vectors.shape[1])
    exact.add(vectors)
    _, truth = exact.search(queries, 10)
    _, found = index.search(queries, 10)
    hits = sum(len(set(t) & set(f)) for t, f in zip(truth.tolist(), found.tolist(), strict=True))
    return hits / truth.size


def _probe_queries(vectors: np.ndarray) -> np.ndarray:
    """Queries that sit between stored vectors (midpoints of random pairs), harder than stored points."""
    rng = np.random.default_rng(0)
    n = min(RECALL_QUERIES, len(vectors))
    a, b = rng.integers(0, len(vectors), n), rng.integers(0, len(vectors), n)
    mix = rng.uniform(0.2, 0.8, size=(n, 1)).astype(np.float32)
    q = mix * vectors[a] + (1 - mix) * vectors[b]
    return (q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def build_index(dim: int, vectors: np.ndarray, exact_up_to: int = EXACT_UP_TO) -> tuple[Any, dict[str, Any]]:
    """Exact inner-product search for small banks; HNSW for large ones, tuned until recall@10 >= 0.95."""
    if len(vectors) <= exact_up_to:
        flat = faiss.IndexFlatIP(dim)
        if len(vectors):
            flat.add(vectors)
        return flat, {"index_type": "IndexFlatIP"}
    index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    index.add(vectors)
    queries = _probe_queries(vectors)
    recall = 0.0
    for ef in (32, 64, 128, 256, 512):
        index.hnsw.efSearch = ef
        recall = recall_at_10(index, vectors, queries)
        if recall >= RECALL_TARGET:
            break
    info = {"index_type": "IndexHNSWFlat", "hnsw_m": HNSW_M, "ef_search": int(index.hnsw.efSearch),
            "recall_at_10": round(recall, 4)}
    return index, info


def version_dir(root: Path, version: str) -> Path:
    """The folder that holds one index version."""
    return root / f"v-{version[:16]}"


def load_index(root: Path, version: str, model_id: str, dim: int) -> LoadedIndex:
    """Load an index version, refusing one that is damaged, or built with another model or of another shape."""
    folder = version_dir(root, version)
    name = version[:16]
    manifest = verified_manifest(folder, version)
    if manifest.get("model_id") != model_id or manifest.get("dim") != dim:
        raise IndexDamagedError(
            f"index was built with model {manifest.get('model_id')} (dim {manifest.get('dim')}) but the "
            f"service uses {model_id} (dim {dim}); re-ingest with `tutor ingest` to rebuild it"
        )
    if manifest.get("content_hash") != version:
        raise _refuse(folder, f"the manifest of index version {name} does not match the bank; run `tutor ingest`")
    try:
        entries = [IndexEntry(*row) for row in manifest["entries"]]
    except (KeyError, TypeError) as exc:
        raise _refuse(folder, f"the manifest of index version {name} has malformed entries; "
                              "run `tutor ingest`") from exc
    if manifest.get("count") != len(entries):
        raise _refuse(folder, f"the manifest of index version {name} says {manifest.get('count')} entries but "
                              f"lists {len(entries)}; run `tutor ingest`")
    try:
        index: Any = faiss.read_index(str(folder / INDEX_FILE))
    except Exception as exc:  # FAISS's message names its source files and the path: the log keeps it
        log.error("index folder %s: FAISS cannot read %s: %s", folder, INDEX_FILE, exc)
        raise IndexDamagedError(f"the index file of version {name} cannot be read; run `tutor ingest`") from exc
    # One query at a time: OpenMP threads only add overhead (and fight the web workers for cores).
    faiss.omp_set_num_threads(1)
    if "ef_search" in manifest:  # efSearch is a search-time setting that the file does not keep
        index.hnsw.efSearch = int(manifest["ef_search"])
    if index.ntotal != len(entries):
        raise _refuse(folder, f"index version {name} holds {index.ntotal} vectors for {len(entries)} entries; "
                              "run `tutor ingest`")
    return LoadedIndex(index=index, entries=entries, manifest=manifest, version=version)


def remove_other_versions(root: Path, keep: str) -> None:
    """Delete index versions and temporary folders other than the live one."""
    if not root.exists():
        return
    live = version_dir(root, keep).name
    for child in root.iterdir():
        if child.is_dir() and child.name != live and (child.name.startswith("v-") or child.name.startswith(".tmp-")):
            shutil.rmtree(child, ignore_errors=True)
