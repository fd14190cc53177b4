"""Opaque random ids with a readable prefix."""

from __future__ import annotations

import secrets


def new_id(prefix: str) -> str:
    """A prefixed id with 128 bits of randomness (unguessable, so it can double as a token)."""
    return f"{prefix}_{secrets.token_urlsafe(16)}"
