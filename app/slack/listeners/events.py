"""Events: answers replied in a question's thread, and @tutor mentions asking concept questions."""

from __future__ import annotations

import re
from typing import Any

from slack_bolt import Ack, App, BoltContext

from app.slack import blocks, service
from app.slack.listeners.common import post_verdict, runtime_of, where_of, who_of
from app.slack.replies import guarded
from app.slack.repository import claim_event

MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")


def acknowledge(ack: Ack) -> None:
    """Acknowledge at once; the work runs after the ack."""
    ack()


def _is_reply(event: dict[str, Any], bot_user_id: str | None) -> bool:
    """A person's plain message inside a thread that does not mention the bot (mentions are questions)."""
    if event.get("subtype") or event.get("bot_id") or not event.get("user"):
        return False
    thread = event.get("thread_ts")
    if not thread or thread == event.get("ts"):
        return False
    return not (bot_user_id and f"<@{bot_user_id}" in (event.get("text") or ""))


@guarded
def on_message(body: dict[str, Any], context: BoltContext) -> None:
    """Grade a reply in one of the bot's question threads, once per Slack event id (retries replay)."""
    event = body.get("event") or {}
    if not _is_reply(event, context.bot_user_id):
        return
    where = where_of(context, event["thread_ts"])
    who = who_of(context)
    key = f"slack:{body.get('event_id') or event.get('client_msg_id') or event['ts']}"
    graded = service.answer(runtime_of(context), who, where, event.get("text") or "", key=key)
    if graded is None or graded.result.get("replayed"):
        return  # not an answer, or Slack retrying an event already graded and answered
    post_verdict(context.client, where, who, graded)


@guarded
def on_mention(body: dict[str, Any], context: BoltContext) -> None:
    """Answer '@tutor <question>' in a thread with a grounded answer and its citations."""
    event = body.get("event") or {}
    event_id = body.get("event_id")
    runtime = runtime_of(context)
    if event_id and not claim_event(runtime.factory, f"slack:{event_id}"):
        return  # a retry of a mention already answered
    question = MENTION.sub("", event.get("text") or "").strip()
    thread = event.get("thread_ts") or event.get("ts")
    if not question:
        message = blocks.help_message()
    else:
        message = blocks.concept_message(question, service.concept(runtime, question, runtime.settings.taxonomy_path))
    context.client.chat_postMessage(channel=context.channel_id or "", thread_ts=thread, **message)


def register(app: App) -> None:
    """Listen for messages (thread answers) and app mentions."""
    app.event("message")(ack=acknowledge, lazy=[on_message])
    app.event("app_mention")(ack=acknowledge, lazy=[on_mention])
