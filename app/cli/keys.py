"""`tutor keys`: create, list and revoke API keys of the public grading API."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import Console
from sqlalchemy.orm import Session

from app.config import get_settings
from app.db import transaction
from app.errors import TutorError
from app.keys import service
from app.models import ApiKey
from app.serving.runtime import Runtime

keys_app = typer.Typer(help="API keys of the public grading API.", no_args_is_help=True)
err = Console(stderr=True)


@contextmanager
def _session() -> Iterator[Session]:
    """A migrated database and one transaction; domain errors end the command with status 1."""
    runtime = Runtime.create(get_settings())
    try:
        runtime.migrate()
        with transaction(runtime.factory) as session:
            yield session
    except TutorError as exc:
        err.print(f"[red]{exc.message}[/]")
        raise typer.Exit(1) from exc
    finally:
        runtime.close()


@keys_app.command("create")
def create(
    name: Annotated[str, typer.Argument(help="who or what the key is for")],
    scope: Annotated[
        list[str] | None, typer.Option("--scope", help=f"repeatable; one of {', '.join(service.KNOWN_SCOPES)}")
    ] = None,
    rate_limit: Annotated[
        str | None, typer.Option("--rate-limit", help='e.g. "60/minute" (default: TUTOR_DEFAULT_RATE_LIMIT)')
    ] = None,
) -> None:
    """Create a key and print its secret, once."""
    with _session() as session:
        key, secret = service.create_key(session, name=name, scopes=scope or ["grade"], rate_limit=rate_limit)
        key_id, scopes, limit = key.id, key.scopes, key.rate_limit
    # Plain echo, not rich: the secret must never be wrapped or styled.
    typer.echo(f"key id: {key_id}")
    typer.echo(f"secret: {secret}")
    typer.echo(f"scopes: {', '.join(scopes)}; rate limit: {limit or get_settings().default_rate_limit}")
    err.print("[bold yellow]Store this secret now: it is not kept and cannot be shown again.[/]")


@keys_app.command("list")
def list_(as_json: Annotated[bool, typer.Option("--json", help="print as JSON")] = False) -> None:
    """List keys with their scopes, state and usage totals (never their secrets)."""
    with _session() as session:
        totals = service.usage_totals(session)
        rows = [_row(key, totals.get(key.id, (0, 0))) for key in service.list_keys(session)]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    # Plain aligned lines, name last: ids and prefixes are never cut, whatever the terminal width.
    typer.echo(_line("id", "prefix", "state", "scopes", "limit", "created", "calls", "items", "name"))
    for row in rows:
        typer.echo(
            _line(
                row["id"],
                row["prefix"],
                "revoked" if row["revoked_at"] else "active",
                ",".join(row["scopes"]),
                row["rate_limit"] or "default",
                row["created_at"][:10],
                str(row["calls"]),
                str(row["items"]),
                row["name"],
            )
        )


def _line(*cells: str) -> str:
    key_id, prefix, state, scopes, limit, created, calls, items, name = cells
    return f"{key_id:<15} {prefix:<12} {state:<8} {scopes:<13} {limit:<12} {created:<10} {calls:>7} {items:>8}  {name}"


def _row(key: ApiKey, total: tuple[int, int]) -> dict[str, Any]:
    return {
        "id": key.id,
        "name": key.name,
        "prefix": key.prefix,
        "scopes": key.scopes,
        "rate_limit": key.rate_limit,
        "created_at": _utc(key.created_at),
        "revoked_at": _utc(key.revoked_at) if key.revoked_at else None,
        "calls": total[0],
        "items": total[1],
    }


def _utc(moment: datetime) -> str:
    # SQLite hands timestamps back without their zone; they are stored in UTC.
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).isoformat()


@keys_app.command("revoke")
def revoke(key_id: Annotated[str, typer.Argument(help="the key's id (k_...)")]) -> None:
    """Revoke a key: a running API refuses its secret within TUTOR_KEY_CACHE_S seconds (2 by default)."""
    with _session() as session:
        key = service.revoke(session, key_id)
        revoked_at = key.revoked_at
    typer.echo(f"revoked {key_id} at {revoked_at:%Y-%m-%d %H:%M:%S} UTC" if revoked_at else f"revoked {key_id}")
    wait = get_settings().key_cache_s
    if wait:
        typer.echo(f"running API processes refuse it within {wait:g} s (TUTOR_KEY_CACHE_S)")
