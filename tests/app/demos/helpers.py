"""Helpers of the demo API tests: build a client, make callers, run a demo to the end."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from app.config import Settings
from app.db import make_engine, make_sessionmaker, transaction
from app.keys.service import create_key
from app.main import create_app
from tests.fakes import FakeEncoder
from tests.worker.helpers import finished, wait_for


def api_client(settings: Settings, **update: Any) -> TestClient:
    """A client of the API with the given settings changed (use as a context manager)."""
    app = create_app(settings.model_copy(update=update), lambda _: FakeEncoder(), load_in_background=False)
    return TestClient(app)


def author_key(settings: Settings, scopes: tuple[str, ...] = ("grade", "author")) -> str:
    """The secret of a new API key (author scope by default) with a limit no test reaches."""
    engine = make_engine(settings.db_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            _, secret = create_key(session, name="demo tests", scopes=scopes, rate_limit="100000/minute")
    finally:
        engine.dispose()
    return secret


def as_learner(api: TestClient) -> TestClient:
    """A client of the same app as a new learner (a chat token, no API key)."""
    plain = TestClient(api.app)
    response = plain.post("/v1/chat/conversations")
    assert response.status_code == 201, response.text
    plain.headers["Authorization"] = f"Bearer {response.json()['token']}"
    return plain


def wait_for_worker(api: TestClient, workers: int = 1, limit: float = 60) -> list[dict[str, Any]]:
    """Wait until `workers` workers are live; their entries in the catalogue."""
    body = wait_for(lambda: api.get("/v1/demos").json(), lambda b: len(b["workers"]) >= workers, limit=limit)
    return list(body["workers"])


def start(api: TestClient, name: str, **params: Any) -> dict[str, Any]:
    """POST a run; its view."""
    response = api.post(f"/v1/demos/{name}/runs", json=params)
    assert response.status_code == 202, response.text
    body: dict[str, Any] = response.json()
    return body


def run_demo(api: TestClient, name: str, **params: Any) -> dict[str, Any]:
    """Run a demo through the API to success; its result."""
    run = start(api, name, **params)
    view = wait_for(lambda: api.get(f"/v1/demos/runs/{run['id']}").json(), finished)
    assert view["status"] == "succeeded", view.get("error")
    result: dict[str, Any] = view["result"]
    assert result["charts"] and all(c["svg"].startswith("<svg") for c in result["charts"])
    assert result["series"] and result["notes"]
    return result


def read_events(
    api: TestClient, run_id: str, events: list[tuple[str, dict[str, Any]]] | None = None,
    headers: dict[str, str] | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """The run's server-sent events through the API (appended to `events` as they come), until the stream ends."""
    events = [] if events is None else events
    kind = ""
    with api.stream("GET", f"/v1/demos/runs/{run_id}/events", headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((kind, json.loads(line.removeprefix("data: "))))
    return events
