"""The Slack bot: quizzes, graded thread answers, grounded answers, a daily question and its leaderboard."""

from __future__ import annotations

from app.config import Settings


def slack_enabled(settings: Settings) -> bool:
    """Slack needs a signing secret and either a bot token or OAuth client credentials."""
    oauth = bool(settings.slack_client_id and settings.slack_client_secret)
    return bool(settings.slack_signing_secret and (settings.slack_bot_token or oauth))
