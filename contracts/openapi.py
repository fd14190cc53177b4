"""The OpenAPI document of both services, completed with the errors they answer, and 405s naming every method.

FastAPI documents an operation's success and, for one with parameters, a 422 in its own `{"detail": [...]}` shape.
What the services really answer besides is left out: the 401 of a credential dependency, the 404 of an unknown id,
the statuses middleware and handlers give, and every error body is `{"error": {"code", "message", "details"}}`
(`contracts.errors.error_body`), 422 included. `complete_openapi` fills that in, in one place per service: each
operation documents each error status it can answer, with the error schema and, for 429 and 503, the Retry-After
header. The service says which errors its routes give beyond what the document itself shows (parameters, a body,
security): those of the middleware and dependencies (`describe`), and those of each route's own code (a list per
operation). It also names the operations whose key is optional and those answering server-sent events.

Starlette answers a method a path lacks with 405 and an `Allow` header naming the methods of the first route
that matches the path only; a path served by two routes (GET and DELETE of one resource) then seems to lack one
of them. `complete_openapi` has the 405 list every method of every route matching the path.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Iterator, Mapping
from copy import deepcopy
from typing import Any, Protocol

import fastapi.routing
from fastapi import FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.exception_handlers import http_exception_handler
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.routing import get_route_path


class Route(Protocol):
    """An API route as the document shows it (FastAPI's route, or its view through an included router)."""

    path_format: str
    methods: set[str]
    dependant: Dependant


# status -> why the operation answers it; several reasons for one status are listed together. A 2xx here is
# another success of the operation, documented with the body of the one FastAPI documents.
Errors = Mapping[int, str | tuple[str, ...]]
# The errors a route answers for `method` beyond those `request_errors` reads from the document.
Describe = Callable[[Route, str], Errors]
# Per operation ("METHOD", "/path" as in the document): errors its code gives that nothing else shows.
OperationErrors = Mapping[tuple[str, str], Errors]

ERROR_SCHEMA_NAME = "Error"
ERROR_SCHEMA: dict[str, Any] = {
    "title": ERROR_SCHEMA_NAME,
    "description": "Every error answer of the service: a stable code, a message for people, and details.",
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "details"],
            "properties": {
                "code": {"type": "string", "description": "stable, for programs (e.g. not_found, rate_limited)"},
                "message": {"type": "string", "description": "for people"},
                "details": {"type": "object", "additionalProperties": True},
            },
        }
    },
}
ERROR_REF = f"#/components/schemas/{ERROR_SCHEMA_NAME}"
# One server-sent event (OpenAPI 3.1: a text/event-stream's schema describes each event); its data is JSON text.
SERVER_SENT_EVENT: dict[str, Any] = {
    "type": "object",
    "required": ["data"],
    "properties": {"event": {"type": "string"}, "id": {"type": "string"}, "data": {"type": "string"}},
}
EVENT_STREAM: dict[str, Any] = {"text/event-stream": {"schema": SERVER_SENT_EVENT}}
RETRY_AFTER_STATUSES = (429, 503)
RETRY_AFTER: dict[str, Any] = {
    "description": "seconds to wait before trying again",
    "schema": {"type": "integer", "minimum": 0},
}
INVALID_REQUEST = "the request does not validate (`details.fields`, when given, names each field at fault)"
# FastAPI's answer to a body it cannot decode as its content type says (JSON that is not UTF-8 text).
UNREADABLE_BODY = "the body cannot be read as its content type says (e.g. JSON that is not UTF-8 text)"
INVALID_PARAMS = "the demo's parameters are out of bounds or unknown (`details.fields` names each)"
RUN_LOST = "the run is from before the worker restarted: its processes ended with the old worker"
# The demo worker's errors beyond those its document implies; the API's demo client maps each of them
# (app/demos/client.py: 422 bad parameters, 429 queue full, 410 a run lost in a restart).
WORKER_ERRORS: dict[tuple[str, str], Errors] = {
    ("POST", "/v1/demos/{name}/runs"): {
        422: (INVALID_REQUEST, INVALID_PARAMS),
        429: "the run queue is full",
    },
    ("GET", "/v1/runs/{run_id}"): {410: RUN_LOST},
    ("DELETE", "/v1/runs/{run_id}"): {410: RUN_LOST},
    ("GET", "/v1/runs/{run_id}/events"): {410: RUN_LOST},
}
WORKER_EVENT_STREAMS = [("GET", "/v1/runs/{run_id}/events")]
# FastAPI's own 422 schema, which no answer of these services has: removed once nothing refers to it.
FASTAPI_VALIDATION_SCHEMAS = ("HTTPValidationError", "ValidationError")
METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE")
HTTP_METHODS = frozenset(m.lower() for m in METHOD_ORDER)


def request_errors(operation: Mapping[str, Any]) -> dict[int, tuple[str, ...]]:
    """The errors an operation's document already implies: 422 for parameters or a body that do not validate,
    400 for a body that cannot even be decoded, 404 for an id in the path that names nothing, 401 for missing or
    wrong credentials when it declares some.

    Each is documented with this reason unless the service gives its own for the status.
    """
    parameters = operation.get("parameters", [])
    errors: dict[int, tuple[str, ...]] = {}
    if parameters or "requestBody" in operation:
        errors[422] = (INVALID_REQUEST,)
    if "requestBody" in operation:
        errors[400] = (UNREADABLE_BODY,)
    if any(p.get("in") == "path" for p in parameters):
        errors[404] = ("nothing has the name or id in the path",)
    if operation.get("security"):
        errors[401] = ("missing, unknown or revoked credentials",)
    return errors


def complete_openapi(
    app: FastAPI,
    *,
    describe: Describe | None = None,
    operations: OperationErrors | None = None,
    optional_security: Callable[[Route], bool] | None = None,
    event_streams: Collection[tuple[str, str]] = (),
) -> None:
    """Make `app.openapi()` document every error each operation answers, and 405s list all of a path's methods.

    `describe` gives the errors a route's dependencies and middleware answer; `operations`, those its own code
    gives, per operation (`stale_entries` names those listed for operations the app lacks: a test keeps the lists
    current, and the document is served regardless). `optional_security` tells the routes that declare
    credentials but serve calls without them: their security then lists the empty requirement `{}` too, as
    OpenAPI says "optional". `event_streams` names the operations ("METHOD", "/path") whose success is a stream
    of server-sent events, which FastAPI documents as JSON.

    Call after the app's error handlers are installed: the 405 goes through the app's own handler. The document
    is completed when first asked for, as FastAPI builds it, so routes added later are covered. A second call does
    nothing.
    """
    if getattr(app.state, "openapi_completed", False):
        return  # completed already: once is enough
    app.state.openapi_completed = True
    build = app.openapi
    listed = operations or {}
    streams = set(event_streams)
    completed: list[int] = []  # the id of the document last completed (FastAPI builds anew when routes change)

    def openapi() -> dict[str, Any]:
        spec = build()
        if completed != [id(spec)]:
            _complete(spec, app, describe, listed, optional_security, streams)
            completed[:] = [id(spec)]
        return spec

    app.openapi_schema = None
    app.openapi = openapi  # type: ignore[method-assign]
    _allow_every_method(app)


def stale_entries(spec: Mapping[str, Any], *lists: Collection[tuple[str, str]]) -> list[tuple[str, str]]:
    """The ("METHOD", "/path") entries of `lists` that name no operation of the document `spec`."""
    documented = {(m.upper(), path) for path, ops in spec.get("paths", {}).items() for m in ops if m in HTTP_METHODS}
    return sorted({entry for listed in lists for entry in listed} - documented)


def complete_worker_openapi(app: FastAPI) -> None:
    """`complete_openapi` for the demo worker: its document, and 405s, complete."""
    complete_openapi(app, operations=WORKER_ERRORS, event_streams=WORKER_EVENT_STREAMS)


def routes_of(app: FastAPI) -> Iterator[Any]:
    """Every route of the app, those of included routers as the app serves them (their prefix, their
    router's dependencies)."""
    contexts = getattr(fastapi.routing, "iter_route_contexts", None)  # FastAPI keeps included routers nested
    yield from contexts(app.routes) if contexts is not None else app.routes


def _operations(app: FastAPI) -> Iterator[tuple[Route, str]]:
    for route in routes_of(app):
        if isinstance(getattr(route, "original_route", route), fastapi.routing.APIRoute) and route.include_in_schema:
            for method in sorted(route.methods):
                yield route, method


def _merge(into: dict[int, list[str]], errors: Errors) -> None:
    for status, reasons in errors.items():
        known = into.setdefault(int(status), [])
        for reason in (reasons,) if isinstance(reasons, str) else reasons:
            if reason not in known:
                known.append(reason)


def _complete(
    spec: dict[str, Any],
    app: FastAPI,
    describe: Describe | None,
    listed: OperationErrors,
    optional_security: Callable[[Route], bool] | None,
    streams: set[tuple[str, str]],
) -> None:
    components = spec.setdefault("components", {})
    components.setdefault("schemas", {})[ERROR_SCHEMA_NAME] = deepcopy(ERROR_SCHEMA)
    for route, method in _operations(app):
        operation = spec["paths"].get(route.path_format, {}).get(method.lower())
        if operation is None:
            continue
        security = operation.get("security")
        if security and optional_security is not None and optional_security(route) and {} not in security:
            security.insert(0, {})
        errors: dict[int, list[str]] = {}
        if describe is not None:
            _merge(errors, describe(route, method))
        _merge(errors, listed.get((method.upper(), route.path_format), {}))
        for status, reasons in request_errors(operation).items():  # said more precisely by the service, if at all
            errors.setdefault(status, list(reasons))
        responses = operation.setdefault("responses", {})
        if (method.upper(), route.path_format) in streams:
            for status, entry in responses.items():
                if status.startswith("2"):
                    entry["content"] = deepcopy(EVENT_STREAM)
        success = next((entry for status, entry in sorted(responses.items()) if status.startswith("2")), None)
        for status in sorted(errors):
            if status < 400:  # another success (e.g. 200 beside 202): the same body as the documented one
                responses.setdefault(str(status), {**deepcopy(success or {}), "description": "; ".join(errors[status])})
                continue
            entry = responses.setdefault(str(status), {"description": "; ".join(errors[status])})
            if _is_fastapi_validation(entry):  # FastAPI's 422: neither its description nor its shape is ours
                entry.update(description="; ".join(errors[status]), content=None)
            if not entry.get("content"):
                entry["content"] = {"application/json": {"schema": {"$ref": ERROR_REF}}}
            if status in RETRY_AFTER_STATUSES:
                entry.setdefault("headers", {}).setdefault("Retry-After", deepcopy(RETRY_AFTER))
        operation["responses"] = dict(sorted(responses.items()))
    _drop_unused(components.get("schemas", {}), spec)


def _is_fastapi_validation(entry: Mapping[str, Any]) -> bool:
    return any(f"#/components/schemas/{name}" in set(_refs(entry)) for name in FASTAPI_VALIDATION_SCHEMAS)


def _refs(value: Any) -> Iterator[str]:
    """Every `$ref` in a part of the document."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "$ref" and isinstance(item, str):
                yield item
            else:
                yield from _refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item)


def _drop_unused(schemas: dict[str, Any], spec: dict[str, Any]) -> None:
    """Remove FastAPI's validation-error schemas once no operation refers to them."""
    others = {name: schema for name, schema in schemas.items() if name not in FASTAPI_VALIDATION_SCHEMAS}
    used = set(_refs(spec.get("paths", {}))) | set(_refs(others))
    for name in FASTAPI_VALIDATION_SCHEMAS:
        if f"#/components/schemas/{name}" not in used:
            schemas.pop(name, None)


def allowed_methods(app: FastAPI, path: str) -> list[str]:
    """Every method some route of the app serves at `path`, in the usual order (empty when none does)."""
    methods: set[str] = set()
    for route in routes_of(app):
        regex = getattr(route, "path_regex", None)
        if regex is not None and regex.match(path):
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods, key=lambda m: (METHOD_ORDER.index(m) if m in METHOD_ORDER else len(METHOD_ORDER), m))


def _allow_every_method(app: FastAPI) -> None:
    """Have a 405 answer's `Allow` name every method of the path, through the app's own HTTP error handler."""
    handler = app.exception_handlers.get(StarletteHTTPException, http_exception_handler)

    async def method_not_allowed(request: Request, exc: Exception) -> Response:
        if isinstance(exc, StarletteHTTPException) and exc.status_code == 405:
            methods = allowed_methods(app, get_route_path(request.scope))
            if methods:
                headers = {**(exc.headers or {}), "Allow": ", ".join(methods)}
                exc = StarletteHTTPException(405, exc.detail, headers=headers)
        response = handler(request, exc)  # Starlette takes plain and async handlers alike
        return await response if inspect.isawaitable(response) else response

    app.exception_handlers[StarletteHTTPException] = method_not_allowed
