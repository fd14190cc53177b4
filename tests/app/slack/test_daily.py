"""`tutor slack daily`: one question to a channel, answers in its thread graded once each and counted weekly."""

from __future__ import annotations

import os
from typing import Any

import pytest
from typer.testing import CliRunner

from app.cli.main import app as cli
from app.config import Settings, get_settings
from tests.app.slack.db import count_attempts, pending
from tests.app.slack.fake_slack import TEAM, FakeSlack
from tests.app.slack.slack_requests import OTHER, USER, Slack

DAILY = "C0DAILY"


def run_daily(settings: Settings, monkeypatch: pytest.MonkeyPatch, *args: str) -> str:
    """Run `tutor slack ...` in-process against the test database and the fake Slack."""
    for name in [n for n in os.environ if n.startswith("TUTOR_")]:
        monkeypatch.delenv(name)
    env = {
        "TUTOR_DATA_DIR": str(settings.data_dir),
        "TUTOR_DATABASE_URL": settings.db_url,
        "TUTOR_SLACK_BOT_TOKEN": "xoxb-test-token",
        "TUTOR_SLACK_API_URL": settings.slack_api_url,
    }
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(cli, ["slack", *args], env=env)
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output.strip()


def reply_in(slack: Slack, channel: str, thread_ts: str, text: str, user: str) -> None:
    """A user's answer in the daily question's thread."""
    ts = f"1800000001.{abs(hash((user, text))) % 999999:06d}"
    slack.event({"type": "message", "channel": channel, "user": user, "text": text, "ts": ts, "thread_ts": thread_ts})


def test_daily_question_answers_and_leaderboard(
    slack: Slack, fake_slack: FakeSlack, slack_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    ts = run_daily(slack_settings, monkeypatch, "daily", "--channel", DAILY)
    [auth, posted] = fake_slack.calls
    assert auth.method == "auth.test" and posted.method == "chat.postMessage" and posted.payload["channel"] == DAILY
    question = pending(slack_settings, ts)
    hint = "Reply in this thread to answer; answers count on this week's `/tutor leaderboard`"
    if question["options"]:
        hint = hint.replace("Reply", "Reply or pick an option:", 1)
    lines = [
        "*Question of the day*",
        question["question"],
        *[f"*{o['key']}.* {o['text']}" for o in question["options"]],
    ]
    assert posted.payload["text"] == f"Question of the day: {question['question']}"
    assert posted.payload["blocks"][0] == {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}}
    assert posted.payload["blocks"][-1]["elements"][0]["text"] == f"{hint} · topics: {', '.join(question['topics'])}"

    reply_in(slack, DAILY, ts, question["accepted"], USER)
    reply_in(slack, DAILY, ts, "the quick brown fox jumps over the lazy dog", OTHER)
    verdicts = fake_slack.wait_for("chat.postMessage", 3)[1:]
    assert {v.payload["thread_ts"] for v in verdicts} == {ts}
    assert all(
        v.payload["blocks"][-1].get("block_id") != "tutor_verdict"
        or all(e["action_id"] != "tutor_next" for e in v.payload["blocks"][-1]["elements"])
        for v in verdicts
    )

    reply_in(slack, DAILY, ts, "a second try", USER)  # one answer per person
    told = fake_slack.wait_for("chat.postEphemeral")[0].payload
    assert told == {
        "channel": DAILY,
        "user": USER,
        "text": "You've already answered this question.",
        "thread_ts": ts,
        "team_id": TEAM,
    }
    assert count_attempts(slack_settings) == 2

    slack.command("leaderboard")
    board: dict[str, Any] = fake_slack.wait_for("response")[0].payload
    lines = board["text"].split("\n")
    assert lines[:2] == ["*This week's leaderboard*", f"1. <@{USER}> — 2 points (1 correct of 1)"]
    assert lines[2].startswith(f"2. <@{OTHER}> — ") and lines[2].endswith("(0 correct of 1)")
    assert board["response_type"] == "in_channel"
    assert board["blocks"] == [{"type": "section", "text": {"type": "mrkdwn", "text": board["text"]}}]

    run_daily(slack_settings, monkeypatch, "leaderboard", "--channel", DAILY)
    assert fake_slack.named("chat.postMessage")[-1].payload == {
        "channel": DAILY,
        "text": board["text"],
        "blocks": board["blocks"],
    }


def test_empty_leaderboard(slack: Slack, fake_slack: FakeSlack) -> None:
    slack.command("leaderboard")
    text = "*This week's leaderboard*\nNo daily-question answers yet this week."
    assert fake_slack.wait_for("response")[0].payload == {
        "text": text,
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
        "response_type": "in_channel",
    }
