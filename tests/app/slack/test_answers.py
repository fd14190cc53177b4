"""Grounded answers (/tutor ask and @tutor), stats, option buttons, and errors told ephemerally."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from app.config import Settings
from app.models import Question
from app.slack.replies import NOT_IN_CHANNEL
from tests.app.slack.db import count_attempts, pending, read
from tests.app.slack.fake_slack import BOT_USER, TEAM, FakeSlack
from tests.app.slack.slack_requests import CHANNEL, USER, Slack


def explained(settings: Settings) -> dict[str, Any]:
    """A question of the bank with its own explanation."""

    def find(session: Any) -> dict[str, Any]:
        q = session.scalars(select(Question).where(Question.explanation.is_not(None)).order_by(Question.id)).first()
        return {"text": q.text, "explanation": q.explanation, "file": q.document, "number": q.number}

    found: dict[str, Any] = read(settings, find)
    return found


BUBBLE = "What is the pipeline bubble?"


def test_mention_answers_from_the_notes_with_citations(slack: Slack, fake_slack: FakeSlack) -> None:
    event = {
        "type": "app_mention",
        "channel": CHANNEL,
        "user": USER,
        "ts": "1800000000.000001",
        "text": f"<@{BOT_USER}> {BUBBLE}",
    }
    assert slack.event(event, event_id="EvMENTION1").status_code == 200
    posted = fake_slack.wait_for("chat.postMessage")[0].payload
    assert posted["channel"] == CHANNEL and posted["thread_ts"] == "1800000000.000001" and posted["team_id"] == TEAM
    assert posted["blocks"][0]["text"]["text"].startswith(f"> {BUBBLE}\n")
    sources = posted["blocks"][1]["elements"][0]["text"]
    assert sources.startswith("📖 From the study notes:\n1. pipeline-parallelism.md · ") and " · lines " in sources
    slack.event(event, event_id="EvMENTION1", retry=1)  # Slack retrying: answered once
    assert len(fake_slack.named("chat.postMessage")) == 1


def test_mention_declines_what_the_notes_do_not_cover(slack: Slack, fake_slack: FakeSlack) -> None:
    event = {
        "type": "app_mention",
        "channel": CHANNEL,
        "user": USER,
        "ts": "1800000000.000002",
        "text": f"<@{BOT_USER}> best croissant bakery in Lyon",
    }
    slack.event(event)
    payload = fake_slack.wait_for("chat.postMessage")[0].payload
    assert payload["text"].startswith("The notes don't cover that, so I won't guess. The nearest topics in the notes")
    assert payload["blocks"] == [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"> best croissant bakery in Lyon\n{payload['text']}"}}
    ]


def test_ask_command(slack: Slack, fake_slack: FakeSlack) -> None:
    slack.command(f"ask {BUBBLE}")
    answer = fake_slack.wait_for("response")[0].payload
    assert answer["response_type"] == "in_channel"
    assert answer["blocks"][0]["text"]["text"].startswith(f"> {BUBBLE}\n")
    assert "pipeline-parallelism.md" in answer["blocks"][1]["elements"][0]["text"]


def test_stats(slack: Slack, fake_slack: FakeSlack, slack_settings: Settings) -> None:
    slack.command("stats")
    text = (
        "*Your progress*\nAnswered: 0 (0 correct) · Streak: 0 day(s) · Due for review: 0\n"
        "No answers yet: `/tutor quiz` starts one."
    )
    assert fake_slack.wait_for("response")[0].payload == {
        "text": text,
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}],
        "response_type": "ephemeral",
    }
    slack.command("quiz")
    fake_slack.wait_for("chat.postMessage")
    root = "1700000000.000001"  # the fake's first ts
    slack.reply(root, pending(slack_settings, root)["accepted"])
    fake_slack.wait_for("chat.postMessage", 2)
    slack.command("stats")
    lines = fake_slack.wait_for("response", 2)[1].payload["text"].split("\n")
    assert lines[:2] == ["*Your progress*", "Answered: 1 (1 correct) · Streak: 1 day(s) · Due for review: 0"]
    assert lines[2].startswith("Mastery: ")


def test_option_buttons_grade_once_per_click(slack: Slack, fake_slack: FakeSlack, slack_settings: Settings) -> None:
    for _ in range(6):  # find a question with options (quizzes pick at random)
        slack.command("quiz")
        posted = fake_slack.named("chat.postMessage")[-1].payload
        if len(posted["blocks"]) == 3:
            break
    else:
        raise AssertionError("no multiple-choice question was asked")
    buttons = posted["blocks"][1]["elements"]
    posts = fake_slack.named("chat.postMessage")
    root = f"1700000000.{len(posts):06d}"
    question = pending(slack_settings, root)
    right = next(o["key"] for o in question["options"] if o["text"] == question["accepted"])
    button = next(b for b in buttons if b["value"].endswith(f":{right}"))
    before = count_attempts(slack_settings)
    slack.click(button["action_id"], button["value"], root)
    verdict = fake_slack.wait_for("chat.postMessage", len(posts) + 1)[-1].payload
    assert verdict["thread_ts"] == root and verdict["blocks"][0]["text"]["text"].startswith("✅ *Correct*")
    slack.click(button["action_id"], button["value"], root)  # a second click: told, not graded again
    assert fake_slack.wait_for("response")[0].payload["text"] == "You've already answered this question."
    assert count_attempts(slack_settings) == before + 1


def test_errors_reach_the_user_ephemerally(slack: Slack, fake_slack: FakeSlack) -> None:
    fake_slack.failures["chat.postMessage"] = "not_in_channel"
    assert slack.command("quiz").status_code == 200
    assert fake_slack.wait_for("response")[0].payload == {
        "text": NOT_IN_CHANNEL,
        "response_type": "ephemeral",
        "replace_original": False,
    }
    slack.command("quiz french cooking")
    told = fake_slack.wait_for("response", 2)[1].payload["text"]
    assert told.startswith("I have no questions on “french cooking”. Topics: ")
