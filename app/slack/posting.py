"""Posting to a channel outside a request: the daily question and the weekly leaderboard (for cron)."""

from __future__ import annotations

from slack_sdk import WebClient
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.errors import TutorError
from app.slack import blocks
from app.slack.daily import choose_daily, leaderboard
from app.slack.installations import SqlInstallationStore, TokenCipher
from app.slack.repository import DAILY
from app.slack.service import Where, remember_post

DAILY_TITLE = "Question of the day"
DAILY_HINT = "Reply in this thread to answer; answers count on this week's `/tutor leaderboard`"


class SlackSetupError(TutorError):
    """Slack settings missing for a command."""


def web_client(settings: Settings, factory: sessionmaker[Session], team_id: str | None) -> tuple[WebClient, str]:
    """A client with the workspace's bot token and the workspace id (the installed one, else the bot token's)."""
    if team_id and settings.slack_client_id:
        store = SqlInstallationStore(settings.slack_client_id, lambda: factory, TokenCipher.from_settings(settings))
        bot = store.find_bot(enterprise_id=None, team_id=team_id)
        if bot is None:
            raise SlackSetupError(f"the app is not installed in workspace {team_id}")
        return WebClient(token=bot.bot_token, base_url=settings.slack_api_url), team_id
    if not settings.slack_bot_token:
        raise SlackSetupError("set TUTOR_SLACK_BOT_TOKEN (or install the app and pass --team)")
    client = WebClient(token=settings.slack_bot_token, base_url=settings.slack_api_url)
    return client, team_id or str(client.auth_test()["team_id"])


def post_daily(
    factory: sessionmaker[Session], client: WebClient, *, team_id: str, channel: str, topic: str | None
) -> str:
    """Post today's question to a channel and remember it; returns the message ts."""
    question = choose_daily(factory, team_id=team_id, channel_id=channel, topic=topic)
    hint = DAILY_HINT.replace("Reply", "Reply or pick an option:", 1) if question["options"] else DAILY_HINT
    message = blocks.question_message(question, title=DAILY_TITLE, hint=hint)
    posted = client.chat_postMessage(channel=channel, **message)
    where = Where(team_id=team_id, channel_id=str(posted["channel"]), thread_ts=str(posted["ts"]))
    remember_post(factory, where, kind=DAILY, question_id=question["id"])
    return where.thread_ts


def post_leaderboard(factory: sessionmaker[Session], client: WebClient, *, team_id: str, channel: str) -> None:
    """Post this week's leaderboard to a channel."""
    client.chat_postMessage(channel=channel, **blocks.leaderboard_message(leaderboard(factory, team_id)))
