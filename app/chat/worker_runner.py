"""The chat's demo runner backed by the demo worker, through the demos proxy's client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from app.config import Settings
from app.demos.client import STREAM_READ_TIMEOUT_S, WorkerClient, raise_for
from app.errors import UnavailableError


class WorkerDemoRunner:
    """Starts runs on the worker, relays their progress events and maps the result for the chat."""

    def __init__(self, settings: Settings) -> None:
        self.client = WorkerClient(settings)

    def start(self, name: str, params: dict[str, Any]) -> str:
        """Queue a run; 503-style errors when the worker is down, 429 when its queue is full."""
        return str(self.client.request("POST", f"/v1/demos/{name}/runs", json=params)["id"])

    def events(self, run_id: str) -> Iterator[dict[str, Any]]:
        """The worker's status and progress events until its `done` event."""
        timeout = httpx.Timeout(self.client.timeout, read=STREAM_READ_TIMEOUT_S)
        url = f"{self.client.url}/v1/runs/{run_id}/events"
        try:
            with httpx.Client(timeout=timeout, headers=self.client.headers) as http, http.stream("GET", url) as res:
                if not res.is_success:
                    res.read()
                    raise_for(res)
                for line in res.iter_lines():
                    if not line.startswith("data:"):
                        continue
                    event = json.loads(line[5:])
                    if event.get("type") == "done":
                        return
                    yield _progress(event)
        except httpx.HTTPError as exc:
            raise UnavailableError("lost the demo worker while following the run") from exc

    def result(self, run_id: str) -> dict[str, Any]:
        """The finished run as the chat shows it: status, summary, series and the first chart."""
        view: dict[str, Any] = self.client.request("GET", f"/v1/runs/{run_id}")
        result = view.get("result") or {}
        charts = result.get("charts") or []
        ranks = view.get("world_size") or 1
        summary = f"Ran with {ranks} rank(s) on {view.get('backend') or 'the worker'}." if view.get("backend") else None
        return {
            "status": view.get("status"),
            "error": view.get("error"),
            "summary": summary,
            "series": result.get("series") or [],
            "chart": charts[0] if charts else None,
        }


def _progress(event: dict[str, Any]) -> dict[str, Any]:
    if event.get("type") == "status":
        position = event.get("position")
        message = f"queued (position {position})" if position else str(event.get("status", "running"))
        return {"status": event.get("status"), "message": message, "fraction": None}
    return {"status": "running", "message": event.get("message") or "running", "fraction": event.get("fraction")}
