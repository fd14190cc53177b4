"""The worker service as a real process: token, validation, and runs that end early (time limit, a dying rank),
which must leave nothing of the run's process group running. Queue limits, cancellation and a killed worker
are tested through the API in tests/app/demos.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import httpx

from tests.worker.helpers import LONG_RUN, finished, wait_for
from worker.procs import group_members


def _run(http: httpx.Client, name: str, **params: Any) -> dict[str, Any]:
    response = http.post(f"/v1/demos/{name}/runs", json=params)
    assert response.status_code == 202, response.text
    body: dict[str, Any] = response.json()
    return body


def _view(http: httpx.Client, run_id: str) -> dict[str, Any]:
    response = http.get(f"/v1/runs/{run_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _running_ranks(http: httpx.Client, run_id: str, ranks: int = 2) -> dict[str, Any]:
    """Wait until the run process and its ranks are all up; the run's view."""
    return wait_for(
        lambda: _view(http, run_id),
        lambda v: v["status"] == "running" and v["pgid"] and len(group_members(v["pgid"])) >= ranks + 1,
    )


def _assert_group_gone(pgid: int) -> None:
    wait_for(lambda: {"left": group_members(pgid)}, lambda v: not v["left"], limit=10)


def test_token_is_required(worker_url: str) -> None:
    assert httpx.get(f"{worker_url}/healthz").status_code == 200
    assert httpx.get(f"{worker_url}/v1/demos").status_code == 401
    wrong = httpx.get(f"{worker_url}/v1/demos", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "unauthorized"
    assert httpx.post(f"{worker_url}/v1/demos/sampler/runs", json={}).status_code == 401


def test_bad_params_are_422(http: httpx.Client) -> None:
    for params in ({"world_size": 9}, {"world_size": "two"}, {"iterations": 10_000}, {"nonsense": True}):
        response = http.post("/v1/demos/allreduce/runs", json=params)
        assert response.status_code == 422, params
        assert response.json()["error"]["code"] == "invalid_request"
    assert http.post("/v1/demos/allreduce/runs", json={"time_limit_s": 599}).status_code == 422  # over the worker's
    assert http.post("/v1/demos/nope/runs", json={}).status_code == 404


def test_time_limit_fails_the_run_and_ends_its_group(http: httpx.Client) -> None:
    run = _run(http, "allreduce", time_limit_s=5, **LONG_RUN)
    view = wait_for(lambda: _view(http, run["id"]), finished)
    assert view["status"] == "failed"
    assert "time limit" in view["error"]
    _assert_group_gone(view["pgid"])


def test_a_dying_rank_fails_the_run_and_ends_its_group(http: httpx.Client) -> None:
    run = _run(http, "allreduce", **LONG_RUN)
    pgid = _running_ranks(http, run["id"])["pgid"]
    rank = next(pid for pid in group_members(pgid) if pid != pgid)
    os.kill(rank, signal.SIGKILL)
    view = wait_for(lambda: _view(http, run["id"]), finished)
    assert view["status"] == "failed"
    assert "rank" in view["error"]
    _assert_group_gone(pgid)
