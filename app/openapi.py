"""The API's OpenAPI document, completed with every error each operation answers (`contracts.openapi`).

Where each error comes from:
- the document itself: parameters or a body (422), an id in the path (404), an API key (401);
- the middleware around every route: a body over its size limit (413) or too slow to arrive (408), and
  admission (503 when the server is at capacity; the probes /healthz and /readyz are exempt);
- the route's dependencies, found by walking its dependency tree: the API key and its rate limit (401, 429),
  a scope (403), the database session (503), the chat's token and origin (401, 403);
- the route's own code, listed per operation in OPERATION_ERRORS (tests/reliability/test_schemathesis.py fails
  on an entry for an operation the app no longer has, and on any status an operation answers undocumented).

An operation whose API key is optional (a learner's call without one is served) says so: its security lists
the empty requirement `{}` beside the key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from fnmatch import fnmatchcase
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant

from app.serving.admission import EXEMPT_PATHS
from contracts import openapi as contract
from contracts.openapi import Errors, Route

BODY_LIMITS: Errors = {
    408: "the request body did not arrive in time (the connection is closed)",
    413: "the request body is over the endpoint's size limit (the connection is closed)",
}
AT_CAPACITY = "the server is at capacity (its request queue is full, or the request waited too long for a turn)"
DATABASE = "the database is unavailable"
NOT_READY = "the model or the index is not loaded yet, or failed its checks (see GET /readyz)"
KEY_LIMIT = "over the API key's rate limit"
STREAMS = {
    429: "this client has as many open event streams as it may",
    503: "the server has as many open event streams as it allows",
}

# A dependency, as "module.function" (fnmatch patterns, for dependencies made per use) -> the errors it answers.
DEPENDENCY_ERRORS: dict[str, Errors] = {
    "app.deps.get_session": {503: DATABASE},
    "app.keys.deps.get_rate_limiter": {503: "rate limiting is misconfigured, or its storage (Redis) is unreachable"},
    "app.keys.deps.require_api_key": {401: "a missing, unknown or revoked API key (X-API-Key)", 429: KEY_LIMIT},
    "app.keys.deps.uncounted_api_key": {401: "a missing, unknown or revoked API key (X-API-Key)", 429: KEY_LIMIT},
    "app.keys.deps.optional_api_key": {401: "an unknown or revoked API key (X-API-Key)", 429: KEY_LIMIT},
    "app.keys.deps.limit_anonymous_*": {
        401: "an unknown or revoked API key (X-API-Key)",
        429: (KEY_LIMIT, "without an API key: over the per-address limit of such calls"),
    },
    "app.keys.deps.require_scope_*": {403: "the API key lacks the scope the operation needs"},
    "app.chat.endpoints.bearer": {
        401: "a malformed or unknown chat token (Authorization: Bearer), or none where the call needs one"
    },
    "app.chat.endpoints.allowed_origin": {403: "a browser origin that is not configured (TUTOR_CORS_ORIGINS)"},
    "app.demos.endpoints.requester": {
        401: "neither an API key (X-API-Key) nor a learner's chat token (Authorization: Bearer), or an unknown one",
        429: KEY_LIMIT,
    },
    "app.demos.endpoints.viewer": {
        401: "an unknown API key (X-API-Key) or chat token (Authorization: Bearer)",
        429: KEY_LIMIT,
    },
    "app.demos.endpoints.job_queue": {503: "live demos are not configured on this server (no worker token)"},
}
# Dependencies that take the API key. Required: 401 without one.
REQUIRED_KEY = ("app.keys.deps.require_api_key", "app.keys.deps.uncounted_api_key")
# Optional: served without one, or with a learner's chat token instead (the demo runs).
OPTIONAL_KEY = (
    "app.keys.deps.optional_api_key", "app.keys.deps.limit_anonymous_*", "app.demos.endpoints.requester",
    "app.demos.endpoints.viewer",
)

# What a route's own code answers besides, per operation.
OPERATION_ERRORS: dict[tuple[str, str], Errors] = {
    ("GET", "/readyz"): {503: "not ready: the database, the rate-limit storage, the model or the index (the reason "
                              "is in the message)"},
    ("GET", "/v1/questions/{question_id}"): {403: "include=answers without an API key of the author scope"},
    ("POST", "/v1/sessions"): {404: "no learner with the body's learner_id"},
    ("POST", "/v1/sessions/{session_id}/answers"): {
        409: "the question is not the one the session asks now, or was already answered (without the same "
             "Idempotency-Key)",
        503: NOT_READY,
    },
    ("POST", "/v1/attempts/{attempt_id}/appeal"): {
        409: "the attempt was already appealed, or already graded as the claimed verdict",
    },
    ("POST", "/v1/ask"): {503: NOT_READY},
    ("POST", "/v1/grade"): {
        404: "no bank question or registered rubric with the body's id",
        503: (NOT_READY, "the grader did not answer in time"),
    },
    ("POST", "/v1/grade/batch"): {503: NOT_READY},
    ("POST", "/v1/rubrics"): {503: NOT_READY},
    ("POST", "/v1/demos/{name}/runs"): {
        200: "a recent result of the same demo and parameters on the same hardware, reused (`reused`; "
             "?fresh=true runs it again)",
        422: (contract.INVALID_REQUEST, "the parameters are out of bounds, over the cost budget, or no connected "
                                        "worker can place them"),
        429: ("the requester already has as many live runs as it may, or the run queue is full",
              "over the requester's limit of run requests"),
        503: ("no demo worker is connected", "the demo job queue cannot be reached"),
    },
    ("GET", "/v1/demos/runs/{run_id}/events"): STREAMS,
    ("POST", "/v1/chat"): {
        403: "the body's conversation belongs to another learner",
        404: "no conversation with the body's conversation_id",
        503: NOT_READY,
    },
    ("POST", "/v1/chat/stream"): {
        403: "the body's conversation belongs to another learner",
        404: "no conversation with the body's conversation_id",
        429: STREAMS[429],
        503: (NOT_READY, STREAMS[503]),
    },
    ("GET", "/v1/chat/conversations/{conversation_id}"): {403: "the conversation belongs to another learner"},
}

# Operations answering server-sent events (POST /v1/chat/stream documents its own).
EVENT_STREAMS = [("GET", "/v1/demos/runs/{run_id}/events")]


def complete_openapi(app: FastAPI) -> None:
    """Document every error each operation of the API answers, and have 405s list all of a path's methods.

    Call in `create_app` once the routes and error handlers are in place.
    """
    contract.complete_openapi(
        app,
        describe=route_errors,
        operations=OPERATION_ERRORS,
        optional_security=key_is_optional,
        event_streams=EVENT_STREAMS,
    )


def route_errors(route: Route, method: str) -> Errors:
    """The errors the middleware and the route's dependencies answer."""
    errors: dict[int, tuple[str, ...]] = {status: (str(reason),) for status, reason in BODY_LIMITS.items()}
    if route.path_format not in EXEMPT_PATHS:
        errors[503] = (AT_CAPACITY,)
    for name in dependency_names(route.dependant):
        for pattern, given in DEPENDENCY_ERRORS.items():
            if fnmatchcase(name, pattern):
                for status, reasons in given.items():
                    listed = (reasons,) if isinstance(reasons, str) else tuple(reasons)
                    errors[status] = tuple(dict.fromkeys((*errors.get(status, ()), *listed)))
    return errors


def key_is_optional(route: Route) -> bool:
    """Whether the route takes an API key but serves calls without one."""
    names = list(dependency_names(route.dependant))

    def takes(patterns: tuple[str, ...]) -> bool:
        return any(fnmatchcase(name, pattern) for name in names for pattern in patterns)

    return takes(OPTIONAL_KEY) and not takes(REQUIRED_KEY)


def dependency_names(dependant: Dependant) -> Iterator[str]:
    """"module.name" of every function in a route's dependency tree (the route's own first)."""
    seen: set[int] = set()
    stack = [dependant]
    while stack:
        current = stack.pop()
        call: Callable[..., Any] | None = current.call
        if call is not None and id(call) not in seen:
            seen.add(id(call))
            name = getattr(call, "__name__", None)
            if name is not None:
                yield f"{getattr(call, '__module__', '')}.{name}"
        stack.extend(reversed(current.dependencies))
