"""Stable ids and content hashes: the same question keeps its id across re-ingestion."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ingest.cleaning import clean


def question_id(document: str, text: str) -> str:
    """Id from the document name and the normalised question text, independent of order."""
    key = f"{document}\n{clean(text).casefold()}"
    return "q_" + hashlib.sha256(key.encode()).hexdigest()[:12]


def text_hash(text: str) -> str:
    """The cache key of a text's embedding (the model is keyed separately)."""
    return hashlib.sha256(text.encode()).hexdigest()


def content_hash(fields: dict[str, Any]) -> str:
    """A hash of everything about a question that is stored or served."""
    blob = json.dumps(fields, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file, read in 1 MB blocks (the index, the encoder and the judge are checked by it)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
