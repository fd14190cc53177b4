"""The API's and the demo worker's OpenAPI documents hold for what the apps answer.

Schemathesis generates requests for every documented operation (valid and invalid ones, and methods a path does
not have) and checks every answer: no 5xx; no status the operation does not document; a body, content type and
headers as documented; a 405 whose `Allow` names every method of the path; and an operation that declares
credentials refusing a call without them. Both apps run in process: the API on a freshly ingested bank and study
notes (fake encoder), with a demo worker taking its jobs from the shared queue, and the worker on its own; the
worker's runs finish at once. Calls carry an API key of every scope, and about half of those naming an id name one
that exists (a learner, a session, an attempt, a rubric, a conversation, a passage, a demo run), so success
answers are checked as well as refusals.

Bounded for CI (a few examples per operation, no shrinking, a fixed seed): about half a minute on two cores.

Before the documents were completed (app/openapi.py, contracts/openapi.py), one run found 30 statuses that
operations answer and did not document (400, 401, 403, 404 and 409 among them), the run events documented as JSON,
the optional API key of the chat, ask and question routes documented as required, and 405s whose `Allow` left out
DELETE or GET of a path served by two routes; and every 422 was documented in FastAPI's `{"detail": [...]}` shape
though sent in the error shape.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import strategies as st
from schemathesis.engine import Status, events, from_schema
from schemathesis.python import asgi
from sqlalchemy import select

from app.config import Settings
from app.db import make_engine, make_sessionmaker, transaction
from app.keys.service import KNOWN_SCOPES, create_key
from app.main import create_app
from app.models import Passage
from app.openapi import EVENT_STREAMS, OPERATION_ERRORS, complete_openapi
from contracts.openapi import ERROR_REF, WORKER_ERRORS, WORKER_EVENT_STREAMS, stale_entries
from tests.conftest import ROOT, SEEDS, ingest_with
from tests.fakes import FakeEncoder
from worker.api import create_worker_app
from worker.devices import DeviceInfo
from worker.runs import Outcome, Run
from worker.settings import WorkerSettings

WORKER_TOKEN = "schemathesis-worker-token"
SEED = 20240611
MAX_EXAMPLES = 5  # per operation and phase: enough to reach every status, small enough for CI
STREAM_READ_S = 3
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "response_headers_conformance",
    "unsupported_method",
    "allow_header_conformance",
    "ignored_auth",
)


@dataclass
class Known:
    """Values that exist, put into about half of the generated requests that take them."""

    path: dict[str, str] = field(default_factory=dict)
    body: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Seen:
    """What a run of Schemathesis saw: how many cases, and each failed check as one line."""

    cases: int = 0
    statuses: set[tuple[str, int]] = field(default_factory=set)
    failures: set[str] = field(default_factory=set)


def instant(run: Run, emit: Callable[[dict[str, Any]], None]) -> Outcome:
    """A demo run that finishes at once (what is checked is the worker's HTTP contract, not its demos)."""
    emit({"type": "progress", "message": "working", "fraction": 1.0})
    return "succeeded", {"series": [], "charts": []}, None


def worker_app(queue_url: str | None = None) -> FastAPI:
    """The demo worker on the CPU, its runs finishing at once: local runs only, or also the jobs of `queue_url`."""
    settings = WorkerSettings(token=WORKER_TOKEN, max_queue=64, queue_url=queue_url, name="schemathesis",
                              heartbeat_s=0.5)
    return create_worker_app(settings, info=DeviceInfo("cpu"), execute=instant)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FastAPI]:
    """The API on a freshly ingested bank and study notes (fake encoder), a demo worker on its job queue."""
    tmp = tmp_path_factory.mktemp("schemathesis")
    data = tmp / "data"
    shutil.copytree(SEEDS, data / "raw")
    shutil.copytree(ROOT / "data" / "notes", data / "notes")
    for name in ("taxonomy.yaml", "annotations.yaml"):
        shutil.copy(ROOT / "data" / name, data / name)
    settings = Settings(data_dir=data, database_url=f"sqlite:///{tmp / 'tutor.db'}", worker_token=WORKER_TOKEN)
    encoder = FakeEncoder()
    ingest_with(settings, encoder, [settings.raw_path, settings.notes_path])
    app = create_app(settings, lambda _: encoder, load_in_background=False)
    complete_openapi(app)  # as create_app does (a second call does nothing)
    with TestClient(worker_app(settings.demo_queue)):  # its lifespan runs the consumer of the API's jobs
        yield app
        asgi.shutdown_lifespans()  # the API's lifespan, started by Schemathesis's in-process client


def _key(settings: Settings) -> str:
    """The secret of a new API key with every scope and a limit no test run reaches."""
    engine = make_engine(settings.db_url)
    try:
        with transaction(make_sessionmaker(engine)) as s:
            _, secret = create_key(s, name="schemathesis", scopes=tuple(KNOWN_SCOPES), rate_limit="100000/minute")
        return secret
    finally:
        engine.dispose()


def _ok(response: Any) -> dict[str, Any]:
    assert response.status_code < 300, (response.status_code, response.text)
    body: dict[str, Any] = response.json()
    return body


def api_known(app: FastAPI) -> tuple[str, Known]:
    """A key of every scope, and ids that exist, made through the API itself."""
    with asgi.get_client(app) as client:
        secret = _key(app.state.runtime.settings)
        key = {"X-API-Key": secret}
        deadline = time.monotonic() + 30
        while not _ok(client.get("/v1/demos"))["available"]:  # the worker's first heartbeat
            assert time.monotonic() < deadline, "the demo worker did not connect"
            time.sleep(0.2)
        question = _ok(client.get("/v1/questions", params={"limit": 1}))["items"][0]
        learner = _ok(client.post("/v1/learners", json={}))["id"]
        quiz = _ok(client.post("/v1/sessions", json={"learner_id": learner, "length": 3}))
        asked = _ok(client.get(f"/v1/sessions/{quiz['id']}/next"))["question"]["id"]
        answered = _ok(client.post(f"/v1/sessions/{quiz['id']}/answers", json={"question_id": asked, "answer": "x"}))
        rubric = _ok(client.post("/v1/rubrics", headers=key, json={
            "question": "What does all-gather do?",
            "reference_answers": ["Every rank ends with the concatenation of all ranks' chunks"],
        }))["rubric_id"]
        chat = _ok(client.post("/v1/chat/conversations"))
        chat_token = f"Bearer {chat['token']}"
        with transaction(app.state.runtime.factory) as session:
            passage = session.scalars(select(Passage.id).limit(1)).one()
        run = _ok(client.post("/v1/demos/sampler/runs", json={}, headers=key))["id"]
    known = Known(
        path={
            "learner_id": learner,
            "session_id": quiz["id"],
            "question_id": question["id"],
            "attempt_id": answered["attempt_id"],
            "rubric_id": rubric,
            "conversation_id": chat["id"],
            "topic_id": question["topics"][0],
            "name": "sampler",
            "passage_id": passage,
            "run_id": run,
        },
        body={"learner_id": learner, "question_id": question["id"], "rubric_id": rubric, "conversation_id": chat["id"]},
        headers={"authorization": chat_token},
    )
    return secret, known


def worker_known(app: FastAPI) -> Known:
    with asgi.get_client(app) as client:
        run = _ok(client.post("/v1/demos/sampler/runs", json={}, headers={"Authorization": f"Bearer {WORKER_TOKEN}"}))
    return Known(path={"run_id": run["id"], "name": "sampler"})


def _with_known(case: schemathesis.Case, known: Known) -> schemathesis.Case:
    """The case with every path parameter and body field that `known` names set to what exists, and the headers
    it names that the operation takes (sent even when generation left them out)."""
    for part, values in ((case.path_parameters, known.path), (case.body, known.body)):
        if isinstance(part, dict):
            for name in list(part):
                if name.lower() in values:
                    part[name] = values[name.lower()]
    headers = {p.name.lower() for p in case.operation.iter_parameters() if p.location == "header"}
    for name in headers & set(known.headers):
        if case.headers is None:
            case.headers = {}
        case.headers[name] = known.headers[name]
    return case


def run_schemathesis(app: FastAPI, auth: dict[str, Any], known: Known) -> Seen:
    """Every operation of the app's document, through Schemathesis's engine as its command line runs it."""
    config = schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "generation": {"max-examples": MAX_EXAMPLES, "no-shrink": True},
            "phases": {"stateful": {"enabled": False}},
            # An event stream is read until this deadline at most (what it sent by then is checked): a finished
            # run's stream asked for events after its last one sends keep-alives until the client leaves.
            "request-timeout": STREAM_READ_S,
            "checks": {"enabled": False, **{name: {"enabled": True} for name in CHECKS}},
            "auth": {"openapi": auth},
            "suppress-health-check": ["all"],
        }
    )
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=config)

    @schema.hook
    def flatmap_case(_: Any, case: schemathesis.Case) -> Any:  # half of the cases, as generated
        return st.booleans().map(lambda existing: _with_known(case, known) if existing else case)

    seen = Seen()
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            recorder = event.recorder
            seen.cases += len(recorder.cases)
            for interaction in recorder.interactions.values():
                if interaction.response is not None:
                    seen.statuses.add((recorder.label, interaction.response.status_code))
            for case_id, checks in recorder.checks.items():
                for check in checks:
                    if check.status == Status.FAILURE and check.failure_info is not None:
                        response = recorder.find_response(case_id=case_id)
                        status = response.status_code if response is not None else None
                        failure = check.failure_info.failure
                        seen.failures.add(
                            f"{recorder.label}: {check.name}: {failure.title} ({status})\n"
                            f"    {failure.message.splitlines()[0] if failure.message else ''}\n"
                            f"    {check.failure_info.code_sample}"
                        )
        elif isinstance(event, events.NonFatalError):  # e.g. the app raised instead of answering
            seen.failures.add(f"{event.label}: {type(event.value).__name__}: {event.value}")
        elif isinstance(event, events.FatalError):
            seen.failures.add(f"schemathesis stopped: {type(event.exception).__name__}: {event.exception}")
    return seen


def test_api_answers_as_documented(api: FastAPI) -> None:
    secret, known = api_known(api)
    seen = run_schemathesis(api, {"APIKeyHeader": {"api_key": secret}}, known)
    assert not seen.failures, "\n".join(sorted(seen.failures))
    operations = {label for label, _ in seen.statuses}
    assert len(operations) >= 25, operations
    # The ids that exist take most operations to a success, whose body is checked too (some are seldom reached
    # by chance: the answer to the one question a quiz session asks now, a first appeal of an attempt).
    successes = {label for label, status in seen.statuses if status < 300}
    assert len(successes) >= 0.75 * len(operations), sorted(operations - successes)


def test_worker_answers_as_documented() -> None:
    app = worker_app()
    try:
        known = worker_known(app)
        seen = run_schemathesis(app, {"HTTPBearer": {"bearer": WORKER_TOKEN}}, known)
    finally:
        asgi.shutdown_lifespans()
    assert not seen.failures, "\n".join(sorted(seen.failures))
    assert {label for label, status in seen.statuses if status < 300} >= {
        "GET /healthz", "GET /v1/info", "GET /v1/demos", "GET /v1/runs/{run_id}", "DELETE /v1/runs/{run_id}",
        "GET /v1/runs/{run_id}/events",
    }


@pytest.mark.parametrize("service", ["api", "worker"])
def test_every_error_is_documented_in_the_error_shape(service: str, tmp_path: Path) -> None:
    spec = (plain_api(tmp_path) if service == "api" else worker_app()).openapi()
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if int(status) >= 400:
                    assert response["content"]["application/json"]["schema"] == {"$ref": ERROR_REF}, (method, path)
                    assert response["description"], (method, path, status)
            codes = set(operation["responses"])
            if operation.get("parameters") or "requestBody" in operation:
                assert "422" in codes, (method, path)
            if "{" in path:
                assert "404" in codes, (method, path)


def plain_api(tmp_path: Path) -> FastAPI:
    """The API, not started (its document and its routing need no database)."""
    app = create_app(Settings(data_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'tutor.db'}"))
    complete_openapi(app)
    return app


def test_the_per_operation_lists_name_documented_operations(tmp_path: Path) -> None:
    assert stale_entries(plain_api(tmp_path).openapi(), OPERATION_ERRORS, EVENT_STREAMS) == []
    assert stale_entries(worker_app().openapi(), WORKER_ERRORS, WORKER_EVENT_STREAMS) == []


@pytest.mark.parametrize(
    ("path", "allowed"),
    [("/v1/demos/runs/abc", "GET, DELETE"), ("/v1/chat/conversations", "GET, POST"), ("/v1/grade", "POST")],
)
def test_a_405_names_every_method_of_the_path(path: str, allowed: str, tmp_path: Path) -> None:
    client = TestClient(plain_api(tmp_path))  # not started: routing answers a 405 before any dependency runs
    for method in ("PUT", "PATCH", "OPTIONS"):
        response = client.request(method, path)
        assert response.status_code == 405, (method, path, response.text)
        assert response.headers["allow"] == allowed
        assert response.json()["error"]["code"] == "method_not_allowed"
