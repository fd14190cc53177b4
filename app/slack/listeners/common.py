"""What every listener needs: the tutor's runtime, who is asking, and posting a question or a verdict."""

from __future__ import annotations

from typing import Any, Protocol

from slack_bolt import BoltContext
from slack_sdk import WebClient

from app.config import Settings
from app.slack import blocks
from app.slack.repository import QUIZ
from app.slack.service import Bank, Graded, Where, Who

QUIZ_HINT = "Reply in this thread to answer"
CHOICE_HINT = "Reply in this thread or pick an option"


class Tutor(Bank, Protocol):
    """What the listeners need of the serving process (the runtime provides it): the bank, the database
    (through the bank) and the settings (the taxonomy, the length of a quiz)."""

    settings: Settings


def runtime_of(context: BoltContext) -> Tutor:
    """The tutor runtime, through the getter the app's middleware attached."""
    runtime: Tutor = context["tutor_runtime"]()
    return runtime


def who_of(context: BoltContext, name: str | None = None) -> Who:
    """The Slack user of the request, in their workspace."""
    team = context.team_id or context.enterprise_id or ""
    return Who(team_id=team, user_id=context.user_id or "", name=name)


def where_of(context: BoltContext, thread_ts: str) -> Where:
    """The thread of the request's channel rooted at thread_ts."""
    team = context.team_id or context.enterprise_id or ""
    return Where(team_id=team, channel_id=context.channel_id or "", thread_ts=thread_ts)


def question_message(nxt: dict[str, Any], title: str) -> blocks.Message:
    """A quiz or daily question with the right hint for its options."""
    question = nxt["question"]
    hint = CHOICE_HINT if question["options"] else QUIZ_HINT
    return blocks.question_message(question, title=title, hint=hint)


def quiz_title(nxt: dict[str, Any]) -> str:
    """'Question 2 of 5'."""
    progress = nxt["progress"]
    return f"Question {progress['answered'] + 1} of {progress['length']}"


def post_verdict(client: WebClient, where: Where, who: Who, graded: Graded) -> None:
    """The verdict in the thread, and the quiz's score when that was its last question."""
    done = graded.result["progress"]["done"]
    message = blocks.verdict_message(graded.result, user_id=who.user_id, can_continue=graded.kind == QUIZ and not done)
    client.chat_postMessage(channel=where.channel_id, thread_ts=where.thread_ts, **message)
    if graded.kind == QUIZ and done:
        summary = blocks.quiz_done_message({"reason": "session complete", "progress": graded.result["progress"]})
        client.chat_postMessage(channel=where.channel_id, thread_ts=where.thread_ts, **summary)
