"""`tutor slack ...`: post the daily question or the weekly leaderboard (run them from cron); make and
rotate the keys that encrypt stored workspace tokens."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from app.config import get_settings
from app.errors import TutorError
from app.serving.runtime import Runtime

slack_app = typer.Typer(help="The Slack bot's scheduled posts and token keys.", no_args_is_help=True)
err = Console(stderr=True)

Channel = Annotated[str, typer.Option("--channel", help="channel id, e.g. C0123456789")]
Team = Annotated[str | None, typer.Option("--team", help="workspace id (multi-workspace installs)")]


@slack_app.command("daily")
def daily(
    channel: Channel,
    team: Team = None,
    topic: Annotated[str | None, typer.Option(help="only questions of this topic id")] = None,
) -> None:
    """Post one question to a channel; answers in its thread are graded and counted weekly."""
    settings = get_settings()
    runtime = Runtime.create(settings)
    if settings.auto_migrate:
        runtime.migrate()
    try:
        from app.slack.posting import post_daily, web_client  # Slack's SDK only for Slack commands

        client, team_id = web_client(settings, runtime.factory, team)
        ts = post_daily(runtime.factory, client, team_id=team_id, channel=channel, topic=topic)
    except Exception as exc:
        err.print(f"[red]could not post the daily question: {exc}[/]")
        raise typer.Exit(1) from exc
    finally:
        runtime.close()
    typer.echo(ts)


@slack_app.command("leaderboard")
def weekly(channel: Channel, team: Team = None) -> None:
    """Post this week's daily-question leaderboard to a channel."""
    settings = get_settings()
    runtime = Runtime.create(settings)
    try:
        from app.slack.posting import post_leaderboard, web_client

        client, team_id = web_client(settings, runtime.factory, team)
        post_leaderboard(runtime.factory, client, team_id=team_id, channel=channel)
    except Exception as exc:
        err.print(f"[red]could not post the leaderboard: {exc}[/]")
        raise typer.Exit(1) from exc
    finally:
        runtime.close()


@slack_app.command("new-key")
def new_key() -> None:
    """Print a new Fernet key for TUTOR_SLACK_TOKEN_KEYS (put it first; keep the old ones until rotated)."""
    from cryptography.fernet import Fernet

    typer.echo(Fernet.generate_key().decode("ascii"))


@slack_app.command("rotate-key")
def rotate_key(
    drop_unreadable: Annotated[
        bool,
        typer.Option(
            "--drop-unreadable", help="delete installations no key decrypts (those workspaces must reinstall)"
        ),
    ] = False,
) -> None:
    """Re-encrypt every stored workspace token with the newest key of TUTOR_SLACK_TOKEN_KEYS.

    One transaction: plain-text rows from before encryption are encrypted, rows under an older key are
    re-encrypted, rows already under the newest key are left alone (running it twice changes nothing).
    Once it has run, the older keys can be removed from TUTOR_SLACK_TOKEN_KEYS.
    """
    from app.slack.installations import TokenCipher, rotate_tokens  # Slack's SDK only for Slack commands

    settings = get_settings()
    runtime = None
    try:
        cipher = TokenCipher.from_settings(settings)
        runtime = Runtime.create(settings)
        if settings.auto_migrate:
            runtime.migrate()
        report = rotate_tokens(runtime.factory, cipher, drop_unreadable=drop_unreadable)
    except TutorError as exc:  # its message names settings and installations, never a key or token
        err.print(f"[red]could not rotate the Slack token key: {escape(exc.message)}[/]")
        raise typer.Exit(1) from None
    finally:
        if runtime is not None:
            runtime.close()
    for key in report.dropped:
        typer.echo(f"dropped {key}")
    typer.echo(report.summary())
