"""A fake Slack Web API on loopback: records every call's payload and answers like Slack does."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlparse

TEAM, BOT_USER, BOT_ID = "T0TEAM", "U0BOT", "B0BOT"


@dataclass
class Call:
    """One request the app made: the API method (or response-URL path) and its payload."""

    method: str
    payload: dict[str, Any]
    token: str | None


class FakeSlack:
    """Serves /api/<method> and /response/<id>; `calls` holds what arrived, in order."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.failures: dict[str, str] = {}  # method -> Slack error code to answer with
        self._ts = itertools.count(1)
        self._cond = threading.Condition()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The server's base URL."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def api_url(self) -> str:
        """What slack_sdk takes as base_url."""
        return f"{self.url}/api/"

    def start(self) -> FakeSlack:
        """Start serving in a thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()

    def record(self, call: Call) -> None:
        """Store a call and wake waiters."""
        with self._cond:
            self.calls.append(call)
            self._cond.notify_all()

    def named(self, method: str) -> list[Call]:
        """The calls of one method (e.g. 'chat.postMessage', or 'response' for response URLs)."""
        with self._cond:
            return [c for c in self.calls if c.method == method]

    def wait_for(self, method: str, count: int = 1, timeout: float = 15.0) -> list[Call]:
        """Block until `count` calls of a method have arrived (bounded); returns them."""
        with self._cond:
            ok = self._cond.wait_for(lambda: len([c for c in self.calls if c.method == method]) >= count, timeout)
        found = self.named(method)
        assert ok, f"expected {count} {method} call(s), got {[c.method for c in self.calls]}"
        return found

    def answer(self, method: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Slack's answer to an API call."""
        if method in self.failures:
            return {"ok": False, "error": self.failures[method]}
        if method == "auth.test":
            return {"ok": True, "team_id": TEAM, "user_id": BOT_USER, "bot_id": BOT_ID, "team": "Tutors", "url": ""}
        if method == "oauth.v2.access":
            return {
                "ok": True,
                "app_id": "A0TUTOR",
                "authed_user": {"id": "U0ADA"},
                "scope": "commands,chat:write",
                "token_type": "bot",
                "access_token": "xoxb-installed",
                "bot_user_id": BOT_USER,
                "team": {"id": TEAM, "name": "Tutors"},
                "enterprise": None,
                "is_enterprise_install": False,
            }
        ts = f"1700000000.{next(self._ts):06d}"
        if method == "chat.postMessage":
            return {"ok": True, "channel": payload.get("channel"), "ts": ts, "message": {"ts": ts, **payload}}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": ts}
        return {"ok": True}

    def _handler(self) -> Callable[..., BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                path = urlparse(self.path).path
                if "json" in (self.headers.get("Content-Type") or ""):
                    payload = json.loads(raw or "{}")
                else:
                    payload = dict(parse_qsl(raw))
                auth = self.headers.get("Authorization")
                token = auth.removeprefix("Bearer ") if auth else payload.pop("token", None)
                if path.startswith("/response/"):
                    fake.record(Call("response", payload, token))
                    self._send(b"ok", "text/plain")
                    return
                method = path.removeprefix("/api/")
                fake.record(Call(method, payload, token))
                self._send(json.dumps(fake.answer(method, payload)).encode(), "application/json")

            def _send(self, body: bytes, kind: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler
