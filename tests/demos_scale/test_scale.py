"""Live demos at study-site scale, with real processes on CPU (gloo): workers that place only what they can,
a worker killed mid-run, an API restarted mid-run, fifty identical requests at once, forged tokens and reports.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from app.chat.store import issue_learner
from app.db import make_engine, make_sessionmaker, transaction
from app.models import DemoJob
from contracts.jobs import JobQueue, job_body, queue_name, sign
from tests.conftest import pg_schema
from tests.demos_scale.conftest import Site, workers_live
from tests.worker.helpers import LONG_RUN, finished, wait_for
from worker.procs import group_members

SMALL = {"dataset_size": 6, "epochs": 1}


def _view(http: httpx.Client, run_id: str) -> dict[str, Any]:
    response = http.get(f"/v1/demos/runs/{run_id}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _start(http: httpx.Client, name: str, **params: Any) -> dict[str, Any]:
    response = http.post(f"/v1/demos/{name}/runs", json=params)
    assert response.status_code in (200, 202), response.text
    body: dict[str, Any] = response.json()
    return body


def _ids(workers: list[dict[str, Any]]) -> dict[int, str]:
    """Worker id by the largest gloo run it offers."""
    return {w["capacity"]["cpu"]: w["id"] for w in workers}


def test_two_workers_with_different_devices_each_claim_only_what_they_can_place(
        shared_site: tuple[Site, str]) -> None:
    site, base = shared_site
    with site.client(base) as http:
        by_ranks = _ids(workers_live(http, 2))
        wide = [_start(http, "sampler", world_size=4, dataset_size=8 + i, epochs=1) for i in range(2)]
        narrow = [_start(http, "sampler", world_size=2, dataset_size=8 + i, epochs=1) for i in range(3)]
        views = [wait_for(lambda r=r: _view(http, r["id"]), finished) for r in wide + narrow]
        too_wide = http.post("/v1/demos/sampler/runs", json={"world_size": 8})
    assert all(v["status"] == "succeeded" for v in views), [v["error"] for v in views]
    assert {v["worker"] for v in views[:2]} == {by_ranks[4]}  # only the 4-rank worker can place 4 ranks
    assert all(v["hardware"]["label"] == "CPU, gloo, 4 ranks" for v in views[:2])
    assert all(v["result"]["figures"]["indices_per_rank"] * 4 >= v["params"]["dataset_size"] for v in views[:2])
    assert all(v["worker"] in by_ranks.values() for v in views[2:])
    assert too_wide.status_code == 422 and "no connected worker can place 8 ranks" in too_wide.text


def _running(http: httpx.Client, run_id: str) -> dict[str, Any]:
    return wait_for(lambda: _view(http, run_id),
                    lambda v: v["status"] == "running" and v["pgid"] and len(group_members(v["pgid"])) >= 3)


def test_a_worker_killed_mid_run_has_its_run_retried_elsewhere_or_failed(make_site: Callable[..., Site]) -> None:
    site = make_site()
    first, second = site.start_worker(2, "one"), site.start_worker(2, "two")
    with site.client(site.start_api()) as http:
        by_name = {w["name"]: w["id"] for w in workers_live(http, 2)}
        # the learner is watching (polling): the run goes to the other worker
        run = _start(http, "allreduce", **LONG_RUN)
        view = _running(http, run["id"])
        victim = first if view["worker"] == by_name["one"] else second
        pgid, started = view["pgid"], time.monotonic()
        victim.send_signal(signal.SIGKILL)
        retried = wait_for(lambda: _view(http, run["id"]), lambda v: v["attempt"] == 2 and v["status"] == "running",
                           limit=30)
        assert time.monotonic() - started < 15
        assert retried["worker"] != view["worker"]
        assert "no heartbeat" in retried["attempts"][0]["error"]
        wait_for(lambda: {"left": group_members(pgid)}, lambda v: not v["left"], limit=10)  # nothing left running
        # nobody is waiting any more: the next loss fails the run with the reason
        survivor = second if victim is first else first
        time.sleep(5)  # longer than TUTOR_DEMO_WATCH_S without a poll
        survivor.send_signal(signal.SIGKILL)
        failed = wait_for(lambda: _view(http, run["id"]), finished, limit=30)
        assert failed["status"] == "failed" and "no heartbeat" in failed["error"]
        assert http.get("/v1/demos").json()["available"] is False  # its devices are no longer offered
        assert http.post("/v1/demos/sampler/runs", json=SMALL).status_code == 503


def test_the_api_restarted_during_a_run_serves_its_result_after_the_restart(make_site: Callable[..., Site]) -> None:
    site = make_site(queue="redis")  # the deployment's queue
    site.start_worker(2, "only")
    base = site.start_api()
    with site.client(base) as http:
        workers_live(http, 1)
        run = _start(http, "pipeline", micro_batches=[1, 2], hidden=64, micro_batch_size=8, steps=1)
        wait_for(lambda: _view(http, run["id"]), lambda v: v["status"] in ("running", "succeeded"))
    site.kill_api(base)
    with site.client(site.start_api()) as http:
        view = wait_for(lambda: _view(http, run["id"]), finished, limit=60)
        assert view["status"] == "succeeded" and view["result"]["figures"]["rows"]
        history = http.get("/v1/demos/pipeline/results").json()
        assert history["kinds"][0]["kind"] == "cpu" and history["kinds"][0]["results"][0]["figures"]["rows"]


def test_fifty_identical_requests_start_one_run_and_none_gets_a_5xx(shared_site: tuple[Site, str]) -> None:
    site, base = shared_site
    engine = make_engine(site.settings.db_url)
    with transaction(make_sessionmaker(engine)) as session:
        tokens = [issue_learner(session)[1] for _ in range(50)]
    with site.client(base) as http:
        workers_live(http, 2)

        def ask(token: str) -> httpx.Response:
            with httpx.Client(base_url=str(http.base_url), timeout=60,
                              headers={"Authorization": f"Bearer {token}"}) as learner:
                return learner.post("/v1/demos/collectives/runs", json={"chunk": 3})

        with ThreadPoolExecutor(50) as pool:
            responses = list(pool.map(ask, tokens))
        assert [r.status_code for r in responses if r.status_code >= 300] == []
        answers = [r.json() for r in responses]
        assert sum(a["answer"] == "fresh" for a in answers) == 1
        assert all(a["reused"] for a in answers if a["answer"] != "fresh")
        with transaction(make_sessionmaker(engine)) as session:
            assert len(session.scalars(select(DemoJob).where(DemoJob.demo == "collectives")).all()) == 1
        fresh = next(a for a in answers if a["answer"] == "fresh")
        first = httpx.Client(base_url=str(http.base_url), headers={"Authorization": f"Bearer {tokens[0]}"})
        done = wait_for(lambda: _view(http, fresh["id"]), finished)
        assert done["status"] == "succeeded"
        # later: the recent result is reused, said to be; a fresh run can still be asked for
        again = first.post("/v1/demos/collectives/runs", json={"chunk": 3})
        assert again.status_code == 200 and again.json()["answer"] == "reused"
        assert again.json()["reused"]["message"].startswith("measured ") and "CPU, gloo, 2 ranks" in \
            again.json()["reused"]["message"]
        assert again.json()["result"]["figures"]["all_correct"] is True
        renewed = first.post("/v1/demos/collectives/runs?fresh=true", json={"chunk": 3})
        assert renewed.status_code == 202 and renewed.json()["answer"] == "fresh"
        first.close()
    engine.dispose()


def test_forged_tokens_jobs_and_reports_are_refused(shared_site: tuple[Site, str]) -> None:
    site, base = shared_site
    impostor = site.workers[2]
    with site.client(base) as http:
        workers = workers_live(http, 2)
        time.sleep(1.5)  # the impostor has sent heartbeats by now: refused, it is never offered
        assert sorted(w["name"] for w in http.get("/v1/demos").json()["workers"]) == ["large", "small"]
        assert {w["name"] for w in workers} == {"large", "small"}
        # a job not signed with the token, put straight on the queue, is never run and is cleared away
        queue = JobQueue(site.settings.demo_queue, "forger's token")
        name = queue_name("cpu", 3)
        queue.put_job(name, job_body(job_id="j_forged", attempt=1, demo="sampler", params={"world_size": 3},
                                     world_size=3, kind="cpu", seq_base=1, expires_at=time.time() + 60))
        wait_for(lambda: {"left": queue.size(name)}, lambda v: v["left"] == 0, limit=20)
        # a report claiming a run's end, not signed with the token, changes nothing
        run = _start(http, "sampler", world_size=3, dataset_size=9, epochs=1)
        queue.storage("demo_reports").enqueue(sign("forger's token", {
            "type": "done", "job": run["id"], "attempt": 1, "worker": "w", "status": "failed", "error": "forged"}))
        view = wait_for(lambda: _view(http, run["id"]), finished)
        assert view["status"] == "succeeded" and view["worker"] != "impostor"
        assert impostor.poll() is None  # still running, never trusted
        queue.close()


def test_two_api_processes_on_postgresql_share_runs_results_and_history(
    make_site: Callable[..., Site], postgres_available: bool
) -> None:
    """The run records on PostgreSQL: identical requests through two API processes make one job, whose
    progress and result either process serves, and whose result lands in the history."""
    if not postgres_available:
        pytest.skip("no PostgreSQL")
    with pg_schema("demos") as url:
        site = make_site("redis", database_url=url)
        one, two = site.start_api(), site.start_api()
        site.start_worker(2, "pg")
        with site.client(one) as a, site.client(two) as b:
            workers_live(a, 1)
            with ThreadPoolExecutor(20) as pool:
                responses = list(pool.map(lambda i: (a, b)[i % 2].post("/v1/demos/sampler/runs", json={}), range(20)))
            assert [r.status_code for r in responses if r.status_code >= 300] == []
            ids = {r.json()["id"] for r in responses}
            engine = make_engine(url)
            with transaction(make_sessionmaker(engine)) as session:
                assert len(session.scalars(select(DemoJob).where(DemoJob.demo == "sampler")).all()) == 1
            engine.dispose()
            run_id = next(iter(ids))
            done = wait_for(lambda: _view(b, run_id), finished)
            assert done["status"] == "succeeded" and _view(a, run_id)["result"] == done["result"]
            history = a.get("/v1/demos/sampler/results").json()
            assert "CPU, gloo" in json.dumps(history)
