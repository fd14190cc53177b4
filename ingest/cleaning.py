"""Whitespace clean-up shared by the parsers and question identity (no parser imports here, so the
serving process, which needs question identity, does not load the document parsers)."""

from __future__ import annotations

import re

_SPACES = re.compile(r"\s+")


def clean(text: str) -> str:
    """Collapse runs of whitespace and strip the ends."""
    return _SPACES.sub(" ", text).strip()
