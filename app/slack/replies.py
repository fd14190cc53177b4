"""Errors turned into one short ephemeral message to the user who caused them, never a silent failure."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from slack_bolt import BoltContext
from slack_sdk.errors import SlackApiError

from app.errors import ConflictError, TutorError, UnavailableError

log = logging.getLogger(__name__)

NOT_READY = "The tutor is still loading its question bank; try again in a minute."
NOT_IN_CHANNEL = "I can't post in this channel: invite me with `/invite @tutor` first."
FAILED = "Sorry, something went wrong on my side; please try again."


def user_message(exc: BaseException) -> str:
    """A short sentence for the user about what went wrong."""
    if isinstance(exc, UnavailableError):
        return NOT_READY
    if isinstance(exc, ConflictError):
        if "expected_question_id" in exc.details:
            return "That isn't the question waiting for your answer."
        if "question_id" in exc.details:
            return "You've already answered this question."
        return exc.message
    if isinstance(exc, TutorError):
        return exc.message
    if isinstance(exc, SlackApiError) and exc.response.get("error") in ("not_in_channel", "channel_not_found"):
        return NOT_IN_CHANNEL
    return FAILED


def thread_of(body: dict[str, Any]) -> str | None:
    """The thread a request came from (an event's thread, or the message holding a button)."""
    event = body.get("event") or {}
    message = body.get("message") or {}
    container = body.get("container") or {}
    return event.get("thread_ts") or message.get("thread_ts") or container.get("message_ts")


def tell(context: BoltContext, body: dict[str, Any], text: str) -> None:
    """Show the user an ephemeral message: through the command's response URL, else in the channel."""
    if context.response_url and context.respond is not None:
        context.respond(text=text, response_type="ephemeral", replace_original=False)
        return
    if context.channel_id and context.user_id:
        context.client.chat_postEphemeral(
            channel=context.channel_id, user=context.user_id, text=text, thread_ts=thread_of(body)
        )


def report(context: BoltContext, body: dict[str, Any], exc: BaseException) -> None:
    """Log an error and tell the user about it (telling may fail too: then it is only logged)."""
    if not isinstance(exc, TutorError):
        log.exception("slack handler failed", exc_info=exc)
    try:
        tell(context, body, user_message(exc))
    except Exception:
        log.exception("could not tell the user about an error")


def guarded(func: Callable[..., None]) -> Callable[..., None]:
    """Wrap a lazy listener so any error reaches the user as a short ephemeral message."""

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> None:
        try:
            func(**kwargs)
        except Exception as exc:
            report(kwargs["context"], kwargs["body"], exc)

    return wrapper
