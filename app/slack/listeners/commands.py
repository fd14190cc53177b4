"""The /tutor slash command: quiz, ask, stats, leaderboard, help (and help for anything else)."""

from __future__ import annotations

from typing import Any

from slack_bolt import Ack, App, BoltContext, Respond

from app.slack import blocks, service
from app.slack.daily import leaderboard
from app.slack.listeners.common import question_message, quiz_title, runtime_of, where_of, who_of
from app.slack.replies import guarded
from app.slack.repository import QUIZ

COMMAND = "/tutor"
SUBCOMMANDS = ("quiz", "ask", "stats", "leaderboard")


def split(text: str) -> tuple[str, str]:
    """The sub-command (lower case) and the rest of the text."""
    head, _, rest = (text or "").strip().partition(" ")
    return head.lower(), rest.strip()


def acknowledge(ack: Ack, command: dict[str, Any]) -> None:
    """Answer at once: help for help and unknown sub-commands; the work happens after the ack."""
    sub, rest = split(command.get("text", ""))
    if sub in ("", "help"):
        ack(**blocks.help_message())
    elif sub not in SUBCOMMANDS:
        ack(**blocks.help_message(f"I don't know `{sub}`."))
    elif sub == "ask" and not rest:
        ack(**blocks.help_message("Ask me something: `/tutor ask what is a pipeline bubble?`"))
    else:
        ack()


def _quiz(context: BoltContext, respond: Respond, command: dict[str, Any], topic_text: str) -> None:
    runtime = runtime_of(context)
    who = who_of(context, command.get("user_name"))
    topic = service.resolve_topic(runtime.settings.taxonomy_path, topic_text)
    learner_id, session_id, nxt = service.start_quiz(runtime.factory, who, topic,
                                                     length=runtime.settings.slack_quiz_length)
    if nxt["done"]:
        respond(response_type="ephemeral", **blocks.quiz_done_message(nxt))
        return
    posted = context.client.chat_postMessage(channel=context.channel_id or "", **question_message(nxt, quiz_title(nxt)))
    where = where_of(context, str(posted["ts"]))
    service.remember_post(runtime.factory, where, kind=QUIZ, learner_id=learner_id, session_id=session_id)


@guarded
def run(body: dict[str, Any], context: BoltContext) -> None:
    """Do the sub-command's work after the ack; replies go through the command's response URL."""
    sub, rest = split(body.get("text", ""))
    respond = context.respond
    if respond is None or sub not in SUBCOMMANDS or (sub == "ask" and not rest):
        return  # answered in the ack
    runtime = runtime_of(context)
    if sub == "quiz":
        _quiz(context, respond, body, rest)
    elif sub == "ask":
        answer = service.concept(runtime, rest, runtime.settings.taxonomy_path)
        respond(response_type="in_channel", **blocks.concept_message(rest, answer))
    elif sub == "stats":
        respond(response_type="ephemeral", **blocks.stats_message(service.stats(runtime.factory, who_of(context))))
    elif sub == "leaderboard":
        standings = leaderboard(runtime.factory, who_of(context).team_id)
        respond(response_type="in_channel", **blocks.leaderboard_message(standings))


def register(app: App) -> None:
    """Listen for /tutor: ack within three seconds, work in a lazy listener."""
    app.command(COMMAND)(ack=acknowledge, lazy=[run])
