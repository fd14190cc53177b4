"""Buttons: an answer option, 'Next question', and 'I was right' (an appeal)."""

from __future__ import annotations

import re
from typing import Any

from slack_bolt import Ack, App, BoltContext

from app.errors import NotFoundError
from app.slack import blocks, service
from app.slack.listeners.common import post_verdict, question_message, quiz_title, runtime_of, where_of, who_of
from app.slack.replies import guarded, tell

CHOICE_ACTION = re.compile(rf"^{blocks.CHOICE}_[A-Z]$")
APPEALED = "Thanks: your appeal is filed for an author to review, and your reviews now count the answer as right."
NOT_YOURS = "This is someone else's quiz: `/tutor quiz` starts your own."


def acknowledge(ack: Ack) -> None:
    """Acknowledge the click at once; the work runs after the ack."""
    ack()


def _root(body: dict[str, Any]) -> str:
    """The ts of the question thread a button sits in (the message itself when it is the root)."""
    message = body.get("message") or {}
    return str(message.get("thread_ts") or (body.get("container") or {}).get("message_ts") or message.get("ts"))


def _action(body: dict[str, Any]) -> dict[str, Any]:
    actions = body.get("actions") or [{}]
    return dict(actions[0])


@guarded
def on_choice(body: dict[str, Any], context: BoltContext) -> None:
    """Grade the option clicked, once per click (the click's action_ts is the idempotency key)."""
    action = _action(body)
    question_id, _, letter = str(action.get("value", "")).rpartition(":")
    where, who = where_of(context, _root(body)), who_of(context)
    graded = service.answer(
        runtime_of(context),
        who,
        where,
        letter,
        key=f"slack:action:{action.get('action_ts')}",
        question_id=question_id,
        choice=letter,
    )
    if graded is None:
        tell(context, body, NOT_YOURS)
    elif not graded.result.get("replayed"):
        post_verdict(context.client, where, who, graded)


@guarded
def on_next(body: dict[str, Any], context: BoltContext) -> None:
    """Post the quiz's next question in its thread (or its score when it is over)."""
    where = where_of(context, _root(body))
    nxt = service.next_in_thread(runtime_of(context).factory, who_of(context), where)
    if nxt is None:
        tell(context, body, NOT_YOURS)
        return
    message = blocks.quiz_done_message(nxt) if nxt["done"] else question_message(nxt, quiz_title(nxt))
    context.client.chat_postMessage(channel=where.channel_id, thread_ts=where.thread_ts, **message)


@guarded
def on_appeal(body: dict[str, Any], context: BoltContext) -> None:
    """'I was right': file an appeal on the clicker's own attempt and confirm it privately."""
    try:
        service.appeal(runtime_of(context).factory, who_of(context), str(_action(body).get("value")))
    except NotFoundError:
        tell(context, body, "You can only appeal your own answers.")
        return
    tell(context, body, APPEALED)


def register(app: App) -> None:
    """Listen for the bot's buttons."""
    app.action(CHOICE_ACTION)(ack=acknowledge, lazy=[on_choice])
    app.action(blocks.NEXT)(ack=acknowledge, lazy=[on_next])
    app.action(blocks.APPEAL)(ack=acknowledge, lazy=[on_appeal])
