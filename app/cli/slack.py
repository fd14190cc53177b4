"""`tutor slack ...`: post the daily question or the weekly leaderboard (run them from cron)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from app.config import get_settings
from app.serving.runtime import Runtime

slack_app = typer.Typer(help="The Slack bot's scheduled posts.", no_args_is_help=True)
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
