"""The proxy when things go wrong: worker down or slow (503 with Retry-After), wrong token, bad parameters,
a full queue, and a worker killed mid-run (the run is reported failed) - while the rest of the API keeps working.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from tests.app.demos.helpers import api_client, read_events, start, unused_url
from tests.worker.helpers import LONG_RUN, TOKEN, finished, free_port, start_worker, stop, wait_for
from worker.procs import alive, descendants, group_members

ROOT = Path(__file__).resolve().parents[3]


def _assert_unavailable(response: Any) -> None:
    assert response.status_code == 503, response.text
    assert 0 < int(response.headers["Retry-After"]) <= 5
    assert "demo worker" in response.json()["error"]["message"]


def test_worker_down_is_503_and_the_rest_keeps_working(demo_data: Settings) -> None:
    with api_client(demo_data, worker_url=unused_url(), worker_token=TOKEN) as api:
        _assert_unavailable(api.post("/v1/demos/allreduce/runs", json={}))
        _assert_unavailable(api.get("/v1/demos/runs/abc-def"))
        _assert_unavailable(api.get("/v1/demos/runs/abc-def/events"))
        catalogue = api.get("/v1/demos").json()
        assert catalogue["available"] is False and len(catalogue["demos"]) == 8
        assert api.get("/healthz").status_code == 200
        assert api.post("/v1/learners", json={}).status_code == 201


@pytest.fixture
def silent_worker() -> Iterator[str]:
    """A 'worker' that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.close()


def test_slow_worker_is_503_after_the_timeout(demo_data: Settings, silent_worker: str) -> None:
    with api_client(demo_data, worker_url=silent_worker, worker_token=TOKEN, worker_timeout_s=0.5) as api:
        response = api.post("/v1/demos/sampler/runs", json={})
        _assert_unavailable(response)
        assert "did not answer" in response.json()["error"]["message"]


def test_wrong_token_is_a_clear_503(demo_data: Settings, demo_worker_url: str) -> None:
    with api_client(demo_data, worker_url=demo_worker_url, worker_token="wrong") as api:
        response = api.post("/v1/demos/sampler/runs", json={})
        assert response.status_code == 503
        assert "TUTOR_WORKER_TOKEN" in response.json()["error"]["message"]


def test_bad_params_are_422_and_unknown_demo_404(api: TestClient) -> None:
    for params in ({"world_size": 9}, {"stages": 1}, {"micro_batches": [0]}, {"bogus": 1}):
        name = "pipeline" if "stages" in params or "micro_batches" in params else "allreduce"
        response = api.post(f"/v1/demos/{name}/runs", json=params)
        assert response.status_code == 422, params
        assert response.json()["error"]["details"]["fields"]
    assert api.post("/v1/demos/nope/runs", json={}).status_code == 404
    assert api.get("/v1/demos/runs/nope").status_code == 404


def test_full_queue_is_429_and_runs_can_be_cancelled(api: TestClient) -> None:
    running = start(api, "allreduce", **LONG_RUN)
    queued = start(api, "sampler")
    assert queued["position"] == 1
    full = api.post("/v1/demos/sampler/runs", json={})
    assert full.status_code == 429 and int(full.headers["Retry-After"]) > 0
    assert api.delete(f"/v1/demos/runs/{queued['id']}").json()["status"] == "cancelled"
    api.delete(f"/v1/demos/runs/{running['id']}")
    view = wait_for(lambda: api.get(f"/v1/demos/runs/{running['id']}").json(), finished)
    assert view["status"] == "cancelled"
    wait_for(lambda: {"left": group_members(view["pgid"])}, lambda v: not v["left"], limit=10)


def test_worker_killed_mid_run_reports_the_run_failed(demo_data: Settings) -> None:
    port = free_port()
    proc = start_worker(port)
    url = f"http://127.0.0.1:{port}"
    with api_client(demo_data, worker_url=url, worker_token=TOKEN) as api:
        run = start(api, "allreduce", **LONG_RUN)
        view = wait_for(
            lambda: api.get(f"/v1/demos/runs/{run['id']}").json(),
            lambda v: v["status"] == "running" and v["pgid"] and len(group_members(v["pgid"])) >= 3,
        )
        events: list[tuple[str, dict[str, Any]]] = []
        reader = threading.Thread(target=read_events, args=(api, run["id"], events))
        reader.start()
        wait_for(lambda: {"n": len(events)}, lambda v: v["n"] >= 1)  # the relay is streaming
        family = descendants(proc.pid)  # the run process and its ranks
        assert len(family) >= 3
        proc.kill()
        proc.wait()
        reader.join(timeout=30)
        assert events[-1][0] == "done" and events[-1][1]["status"] == "failed"
        wait_for(lambda: {"left": group_members(view["pgid"])}, lambda v: not v["left"], limit=10)
        wait_for(lambda: {"left": [p for p in family if alive(p)]}, lambda v: not v["left"], limit=10)
        _assert_unavailable(api.get(f"/v1/demos/runs/{run['id']}"))
        restarted = start_worker(port)
        try:
            lost = api.get(f"/v1/demos/runs/{run['id']}").json()
            assert lost["status"] == "failed" and "restarted" in lost["error"]
        finally:
            stop(restarted)


def test_compose_file_validates() -> None:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.skip("docker-compose is not installed")
    result = subprocess.run([binary, "config", "-q"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("run_id", ["%05", "..%2F..%2Fhealthz", "abc%3Fx%3D1", "a%23b", "%F0%9F%98%80"])
def test_a_malformed_run_id_is_a_clear_4xx_and_never_reaches_the_worker(api: TestClient, run_id: str) -> None:
    for method, path in (("GET", f"/v1/demos/runs/{run_id}"), ("DELETE", f"/v1/demos/runs/{run_id}"),
                         ("GET", f"/v1/demos/runs/{run_id}/events")):
        response = api.request(method, path)
        assert response.status_code in (404, 422), (method, path, response.status_code, response.text)
        assert "error" in response.json()


def test_a_lone_surrogate_in_run_parameters_is_a_clear_4xx(api: TestClient) -> None:
    body = b'{"world_size": 2, "label": "\\ud800"}'
    response = api.post("/v1/demos/allreduce/runs", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code in (400, 422), (response.status_code, response.text)
    assert "error" in response.json()
