"""Helpers of the demo API tests: build a client, run a demo to the end."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from tests.fakes import FakeEncoder
from tests.worker.helpers import finished, free_port, wait_for


def api_client(settings: Settings, **worker: Any) -> TestClient:
    """A client of the API with the given worker settings (use as a context manager)."""
    app = create_app(settings.model_copy(update=worker), lambda _: FakeEncoder(), load_in_background=False)
    return TestClient(app)


def unused_url() -> str:
    """A worker URL where nothing listens."""
    return f"http://127.0.0.1:{free_port()}"


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
    api: TestClient, run_id: str, events: list[tuple[str, dict[str, Any]]] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """The run's server-sent events through the API (appended to `events` as they come), until the stream ends."""
    events = [] if events is None else events
    kind = ""
    with api.stream("GET", f"/v1/demos/runs/{run_id}/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((kind, json.loads(line.removeprefix("data: "))))
    return events
