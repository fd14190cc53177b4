"""Listeners grouped by kind; each module has a register(app)."""

from __future__ import annotations

from slack_bolt import App

from app.slack.listeners import actions, commands, events


def register_all(app: App) -> None:
    """Register every listener of the bot."""
    commands.register(app)
    events.register(app)
    actions.register(app)
