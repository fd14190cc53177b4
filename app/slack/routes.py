"""Mount the Bolt app in FastAPI: POST /slack/events, and the OAuth install routes when configured."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from app.config import Settings
from app.errors import error_body
from app.serving.runtime import Runtime
from app.slack import slack_enabled

if TYPE_CHECKING:
    from slack_bolt.adapter.fastapi import SlackRequestHandler

log = logging.getLogger(__name__)


def mount(app: FastAPI, settings: Settings) -> None:
    """Add the Slack routes; without Slack settings POST /slack/events answers 503."""
    router = APIRouter(tags=["slack"])
    if not slack_enabled(settings):

        @router.post("/slack/events", include_in_schema=False)
        def disabled() -> JSONResponse:
            """Slack is not configured."""
            body = error_body("slack_disabled", "Slack is not configured: set TUTOR_SLACK_SIGNING_SECRET and a token")
            return JSONResponse(body, 503)

        app.include_router(router)
        return

    # Bolt and the Slack SDK load only when Slack is configured (they cost start-up time otherwise).
    from slack_bolt.adapter.fastapi import SlackRequestHandler
    from slack_bolt.adapter.starlette.handler import to_bolt_request, to_starlette_response
    from slack_sdk.signature import SignatureVerifier

    from app.slack.bolt import TrackedExecutor, build_bolt

    def runtime() -> Runtime:
        found: Runtime = app.state.runtime
        return found

    executor = TrackedExecutor()
    bolt = build_bolt(settings, runtime, executor)
    handler = SlackRequestHandler(bolt)
    verifier = SignatureVerifier(settings.slack_signing_secret or "")
    app.state.slack_bolt, app.state.slack_executor = bolt, executor

    @router.post("/slack/events", include_in_schema=False)
    async def events(request: Request) -> Response:
        """Slack's events, commands and interactions; Bolt verifies the signature and acks."""
        body = await request.body()
        # Verified here, before Bolt sees anything: a request that is not Slack's (a forged signature,
        # a timestamp that is not a number, stale) is refused at once and never reaches a listener,
        # whose error path would otherwise answer to the request's own response_url.
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:  # Slack sends text; this cannot even be checked against a signature
            return JSONResponse(error_body("invalid_request", "malformed Slack payload: not UTF-8 text"), 400)
        headers = request.headers
        timestamp = headers.get("x-slack-request-timestamp", "")
        if not (timestamp.isdigit() and verifier.is_valid(body, timestamp, headers.get("x-slack-signature", ""))):
            return JSONResponse(error_body("unauthorized", "invalid or stale Slack signature"), 401)
        try:
            bolt_request = to_bolt_request(request, body)
        except ValueError:  # signed, but not a form or JSON that Slack sends
            return JSONResponse(error_body("invalid_request", "malformed Slack payload"), 400)
        # Bolt's dispatch is synchronous (authorisation may query the database): keep it off the event loop.
        bolt_response = await run_in_threadpool(bolt.dispatch, bolt_request)
        return to_starlette_response(bolt_response)

    if bolt.oauth_flow is not None:

        @router.get("/slack/install", include_in_schema=False)
        async def install(request: Request) -> Response:
            """The 'Add to Slack' page of the multi-workspace install."""
            return await handler.handle(request)

        @router.get("/slack/oauth_redirect", include_in_schema=False)
        async def oauth_redirect(request: Request) -> Response:
            """Slack's redirect back after an install: stores the installation."""
            return await run_in_threadpool(_callback, handler, request, await request.body())

    app.include_router(router)
    log.info("slack enabled (%s)", "oauth" if bolt.oauth_flow else "single workspace")


def _callback(handler: SlackRequestHandler, request: Request, body: bytes) -> Response:
    """Finish an install (exchanges the code with Slack, so run in a thread)."""
    from slack_bolt.adapter.starlette.handler import to_bolt_request, to_starlette_response

    flow = handler.app.oauth_flow
    assert flow is not None
    return to_starlette_response(flow.handle_callback(to_bolt_request(request, body)))
