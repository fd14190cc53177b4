"""The Bolt app: request verification, single- or multi-workspace authorisation, listeners, one error handler."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from slack_bolt import App, BoltContext, BoltResponse
from slack_bolt.oauth.oauth_settings import OAuthSettings
from slack_sdk import WebClient

from app.config import Settings
from app.slack.installations import SqlInstallationStore, SqlStateStore, TokenCipher
from app.slack.listeners import register_all
from app.slack.listeners.common import Tutor
from app.slack.replies import report

log = logging.getLogger(__name__)
RuntimeGetter = Callable[[], Tutor]  # the process's runtime, looked up when a request needs it (app/slack/routes.py)
BOT_SCOPES = ["app_mentions:read", "channels:history", "groups:history", "chat:write", "commands"]


class TrackedExecutor(ThreadPoolExecutor):
    """The lazy listeners' thread pool; knows when all submitted work is done (for shutdown and tests)."""

    def __init__(self, max_workers: int = 8) -> None:
        super().__init__(max_workers=max_workers, thread_name_prefix="slack-lazy")
        self._pending: set[Future[Any]] = set()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Run fn in the pool and track it until it finishes."""
        future = super().submit(fn, *args, **kwargs)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._done)
        return future

    def _done(self, future: Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)
            self._idle.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Block until no submitted work is left (or the timeout passes); True when idle."""
        with self._lock:
            return self._idle.wait_for(lambda: not self._pending, timeout)


def _credentials(settings: Settings, runtime: RuntimeGetter) -> dict[str, Any]:
    """Bolt's authorisation arguments: OAuth with the database stores, else the single bot token."""
    if settings.slack_client_id and settings.slack_client_secret:

        def factory() -> Any:
            return runtime().factory

        store = SqlInstallationStore(settings.slack_client_id, factory, TokenCipher.from_settings(settings))
        oauth = OAuthSettings(
            client_id=settings.slack_client_id,
            client_secret=settings.slack_client_secret,
            scopes=BOT_SCOPES,
            installation_store=store,
            state_store=SqlStateStore(factory),
        )
        return {"oauth_settings": oauth, "installation_store": store}
    # Bolt takes the token from the client it is given; auth.test then runs on the first request, not here.
    return {"token": settings.slack_bot_token, "token_verification_enabled": False}


def build_bolt(settings: Settings, runtime: RuntimeGetter, executor: TrackedExecutor) -> App:
    """The Bolt app; nothing touches the network until the first request."""
    credentials = _credentials(settings, runtime)
    bolt = App(
        name="gpu-tutor",
        signing_secret=settings.slack_signing_secret,
        client=WebClient(token=credentials.pop("token", None), base_url=settings.slack_api_url),
        listener_executor=executor,
        **credentials,
    )

    @bolt.middleware
    def attach_runtime(context: BoltContext, next: Callable[[], BoltResponse]) -> BoltResponse:
        # The getter, not the runtime: lazy listeners get a deep copy of the context, and functions copy as themselves.
        context["tutor_runtime"] = runtime
        return next()

    @bolt.error
    def on_error(error: Exception, body: dict[str, Any], context: BoltContext, response: BoltResponse | None) -> None:
        report(context, body, error)
        if response is not None:  # the user has been told; a 500 would only make Slack retry
            response.status, response.body = 200, ""

    register_all(bolt)
    return bolt
