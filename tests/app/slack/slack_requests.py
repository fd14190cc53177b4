"""Requests signed exactly as Slack signs them, sent to the running app."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from typing import Any
from urllib.parse import urlencode

from fastapi.testclient import TestClient
from httpx import Response

from tests.app.slack.fake_slack import BOT_USER, TEAM, FakeSlack

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
CHANNEL, USER, OTHER = "C0QUIZ", "U0ADA", "U0BOB"
_ids = itertools.count(1)


def signature(secret: str, timestamp: str, body: str) -> str:
    """Slack's request signature: v0=HMAC-SHA256(secret, 'v0:{ts}:{body}')."""
    digest = hmac.new(secret.encode(), f"v0:{timestamp}:{body}".encode(), hashlib.sha256).hexdigest()
    return f"v0={digest}"


class Slack:
    """Sends signed slash commands, events and button clicks; waits for the app's lazy work."""

    def __init__(self, client: TestClient, fake: FakeSlack, secret: str = SECRET) -> None:
        self.client, self.fake, self.secret = client, fake, secret

    def post(
        self,
        body: str,
        content_type: str,
        *,
        age: int = 0,
        secret: str | None = None,
        retry: int | None = None,
    ) -> Response:
        """POST a raw body to /slack/events, signed (with another secret or an old timestamp if asked)."""
        ts = str(int(time.time()) - age)
        headers = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": signature(secret or self.secret, ts, body),
        }
        if retry is not None:
            headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
        response = self.client.post("/slack/events", content=body.encode(), headers=headers)
        self.settle()
        return response

    def settle(self) -> None:
        """Wait (bounded) until the lazy listeners have finished."""
        assert self.client.app.state.slack_executor.wait_idle(30), "lazy listeners did not finish"  # type: ignore[attr-defined]

    def command(self, text: str, user: str = USER, **kw: Any) -> Response:
        """/tutor <text> from a user in the quiz channel."""
        n = next(_ids)
        form = {
            "token": "legacy",
            "team_id": TEAM,
            "team_domain": "tutors",
            "channel_id": CHANNEL,
            "channel_name": "gpu",
            "user_id": user,
            "user_name": user.lower(),
            "command": "/tutor",
            "text": text,
            "api_app_id": "A0TUTOR",
            "response_url": f"{self.fake.url}/response/{n}",
            "trigger_id": f"trig{n}",
        }
        return self.post(urlencode(form), "application/x-www-form-urlencoded", **kw)

    def event(self, event: dict[str, Any], event_id: str | None = None, **kw: Any) -> Response:
        """An Events API callback carrying one event."""
        body = {
            "token": "legacy",
            "team_id": TEAM,
            "api_app_id": "A0TUTOR",
            "type": "event_callback",
            "event": event,
            "event_id": event_id or f"Ev{next(_ids):08d}",
            "event_time": int(time.time()),
            "authorizations": [{"team_id": TEAM, "user_id": BOT_USER, "is_bot": True}],
        }
        return self.post(json.dumps(body), "application/json", **kw)

    def reply(self, thread_ts: str, text: str, user: str = USER, **kw: Any) -> Response:
        """A user's message in a thread."""
        ts = f"1800000000.{next(_ids):06d}"
        event = {"type": "message", "channel": CHANNEL, "user": user, "text": text, "ts": ts, "thread_ts": thread_ts}
        return self.event(event, **kw)

    def click(
        self, action_id: str, value: str, message_ts: str, thread_ts: str | None = None, user: str = USER
    ) -> Response:
        """A button click on a message of the bot."""
        n = next(_ids)
        message = {"ts": message_ts, **({"thread_ts": thread_ts} if thread_ts else {})}
        payload = {
            "type": "block_actions",
            "team": {"id": TEAM, "domain": "tutors"},
            "user": {"id": user, "team_id": TEAM},
            "api_app_id": "A0TUTOR",
            "channel": {"id": CHANNEL},
            "trigger_id": f"trig{n}",
            "container": {"type": "message", "message_ts": message_ts, "channel_id": CHANNEL},
            "message": message,
            "response_url": f"{self.fake.url}/response/{n}",
            "actions": [
                {
                    "action_id": action_id,
                    "block_id": "b",
                    "value": value,
                    "type": "button",
                    "action_ts": f"1900000000.{n:06d}",
                }
            ],
        }
        return self.post(urlencode({"payload": json.dumps(payload)}), "application/x-www-form-urlencoded")
