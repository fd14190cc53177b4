"""Stable ids and content hashes: the same question keeps its id across re-ingestion."""

from __future__ import annotations

import hashlib
import json
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
