"""Live demos when things go wrong: no worker connected (503 with Retry-After, the rest keeps working), no
credentials, bad parameters and the cost budget, a full queue (429), cancellation, and runs of other learners.

Killed workers, restarts and many workers are tested with real processes in tests/demos_scale.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.config import Settings
from tests.app.demos.helpers import api_client, as_learner, author_key, start
from tests.worker.helpers import LONG_RUN, finished, wait_for
from worker.procs import group_members

ROOT = Path(__file__).resolve().parents[3]


def _assert_unavailable(response: Any) -> None:
    assert response.status_code == 503, response.text
    assert 0 < int(response.headers["Retry-After"]) <= 5
    assert "demo worker" in response.json()["error"]["message"]


def test_no_worker_connected_is_503_and_the_rest_keeps_working(demo_data: Settings, tmp_path: Path) -> None:
    alone = demo_data.model_copy(update={"database_url": f"sqlite:///{tmp_path / 'tutor.db'}",
                                         "demo_queue_url": str(tmp_path / "queue.db")})
    with api_client(alone) as api:
        api.headers["X-API-Key"] = author_key(alone)
        _assert_unavailable(api.post("/v1/demos/allreduce/runs", json={}))
        assert api.get("/v1/demos/runs/abc-def").status_code == 404
        catalogue = api.get("/v1/demos").json()
        assert catalogue["available"] is False and len(catalogue["demos"]) == 8
        assert api.get("/healthz").status_code == 200
        assert api.post("/v1/learners", json={}).status_code == 201


def test_without_a_worker_token_demos_are_not_configured(demo_data: Settings) -> None:
    with api_client(demo_data, worker_token=None) as api:
        api.headers["X-API-Key"] = author_key(demo_data)
        response = api.post("/v1/demos/sampler/runs", json={})
        assert response.status_code == 503 and "TUTOR_WORKER_TOKEN" in response.json()["error"]["message"]


def test_runs_need_a_learner_token_or_an_api_key(api: TestClient) -> None:
    anonymous = TestClient(api.app)
    assert anonymous.post("/v1/demos/sampler/runs").status_code == 401
    run = start(api, "sampler", dataset_size=4)
    for method, path in (("GET", f"/v1/demos/runs/{run['id']}"), ("DELETE", f"/v1/demos/runs/{run['id']}"),
                         ("GET", f"/v1/demos/runs/{run['id']}/events")):
        response = anonymous.request(method, path)
        assert response.status_code == 404, (method, path, response.text)  # nobody's run is theirs
    assert wait_for(lambda: api.get(f"/v1/demos/runs/{run['id']}").json(), finished)["status"] == "succeeded"
    forged = anonymous.post("/v1/demos/sampler/runs", headers={"Authorization": "Bearer ct_forged"})
    assert forged.status_code == 401
    assert anonymous.get("/v1/demos").status_code == 200  # the catalogue is public


def test_bad_params_are_422_and_unknown_demo_404(api: TestClient) -> None:
    for params in ({"world_size": 9}, {"stages": 1}, {"micro_batches": [0]}, {"bogus": 1}):
        name = "pipeline" if "stages" in params or "micro_batches" in params else "allreduce"
        response = api.post(f"/v1/demos/{name}/runs", json=params)
        assert response.status_code == 422, params
        assert response.json()["error"]["details"]["fields"]
    assert api.post("/v1/demos/nope/runs", json={}).status_code == 404
    assert api.get("/v1/demos/runs/nope").status_code == 404
    assert api.post("/v1/demos/allreduce/runs", json={"time_limit_s": 599}).status_code == 422  # over the server's


def test_the_cost_budget_refuses_the_heavy_run_with_a_clear_422(api: TestClient) -> None:
    heavy = {"world_size": 8, "min_bytes": 268435456, "max_bytes": 268435456, "iterations": 200}
    learner = as_learner(api)
    response = learner.post("/v1/demos/allreduce/runs", json=heavy)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert "budget" in error["message"] and error["details"]["cost"] > error["details"]["budget"]
    # a world size no worker can place (the session's worker offers 2 ranks): 422 that says so
    wide = learner.post("/v1/demos/sampler/runs", json={"world_size": 4})
    assert wide.status_code == 422 and "no connected worker can place 4 ranks" in wide.json()["error"]["message"]


def test_full_queue_is_429_and_runs_can_be_cancelled(api: TestClient) -> None:
    running = start(api, "allreduce", **LONG_RUN)
    wait_for(lambda: api.get(f"/v1/demos/runs/{running['id']}").json(), lambda v: v["status"] == "running")
    queued = start(api, "sampler", dataset_size=7)
    assert queued["position"] == 1
    full = api.post("/v1/demos/sampler/runs", json={"dataset_size": 8})
    assert full.status_code == 429 and int(full.headers["Retry-After"]) > 0
    assert "full" in full.json()["error"]["message"]
    assert api.delete(f"/v1/demos/runs/{queued['id']}").json()["status"] == "cancelled"
    api.delete(f"/v1/demos/runs/{running['id']}")
    view = wait_for(lambda: api.get(f"/v1/demos/runs/{running['id']}").json(), finished)
    assert view["status"] == "cancelled"
    wait_for(lambda: {"left": group_members(view["pgid"])}, lambda v: not v["left"], limit=10)


def test_learners_see_and_cancel_only_their_own_runs(api: TestClient) -> None:
    alice, bob = as_learner(api), as_learner(api)
    response = alice.post("/v1/demos/sampler/runs", json={"dataset_size": 5})
    assert response.status_code == 202, response.text
    run = response.json()
    assert bob.get(f"/v1/demos/runs/{run['id']}").status_code == 404
    assert bob.delete(f"/v1/demos/runs/{run['id']}").status_code == 404
    assert bob.get(f"/v1/demos/runs/{run['id']}/events").status_code == 404
    assert api.get(f"/v1/demos/runs/{run['id']}").status_code == 200  # an author key sees every run
    second = alice.post("/v1/demos/sampler/runs", json={"dataset_size": 6})
    assert second.status_code == 429 and "live demo run" in second.json()["error"]["message"]  # one at a time
    grade_only = TestClient(api.app, headers={"X-API-Key": author_key(_settings(api), scopes=("grade",))})
    assert grade_only.get(f"/v1/demos/runs/{run['id']}").status_code == 404
    view = wait_for(lambda: alice.get(f"/v1/demos/runs/{run['id']}").json(), finished)
    assert view["status"] == "succeeded"


def _settings(api: TestClient) -> Settings:
    settings: Settings = api.app.state.runtime.settings  # type: ignore[attr-defined]
    return settings


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
