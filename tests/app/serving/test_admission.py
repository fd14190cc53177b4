"""Admission control: a bounded number of requests inside the app, a bounded wait, 503 + Retry-After beyond."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import anyio
import anyio.to_thread
import httpx
import numpy as np
import pytest
from starlette.types import Receive, Scope, Send

from app.config import WORKER_THREADS, Settings
from app.db import make_engine, make_sessionmaker, transaction
from app.keys.service import create_key
from app.main import create_app
from app.serving.admission import ConcurrencyLimit
from tests.conftest import ingest_with
from tests.fakes import FakeEncoder
from tests.serving import serving_in_thread


class Slow:
    """An ASGI app that takes `delay` seconds per request and records the peak concurrency."""

    def __init__(self, delay: float) -> None:
        self.delay, self.now, self.peak = delay, 0, 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(self.delay)
        self.now -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def _burst(app: ConcurrencyLimit, n: int, path: str = "/v1/grade") -> list[httpx.Response]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        return list(await asyncio.gather(*(client.get(path) for _ in range(n))))


def test_requests_beyond_the_limit_wait_their_turn() -> None:
    inner = Slow(0.05)
    responses = asyncio.run(_burst(ConcurrencyLimit(inner, limit=3, queue=100, wait_s=10), 12))
    assert [r.status_code for r in responses] == [200] * 12
    assert inner.peak == 3


def test_a_full_queue_answers_503_with_retry_after_at_once() -> None:
    inner = Slow(0.3)
    start = time.monotonic()
    responses = asyncio.run(_burst(ConcurrencyLimit(inner, limit=2, queue=1, wait_s=10), 6))
    codes = sorted(r.status_code for r in responses)
    assert codes == [200, 200, 200, 503, 503, 503]
    refused = [r for r in responses if r.status_code == 503]
    assert all(r.headers["retry-after"] == "1" and r.json()["error"]["code"] == "overloaded" for r in refused)
    assert time.monotonic() - start < 2


def test_a_long_wait_answers_503() -> None:
    responses = asyncio.run(_burst(ConcurrencyLimit(Slow(0.5), limit=1, queue=10, wait_s=0.1), 2))
    assert sorted(r.status_code for r in responses) == [200, 503]
    assert "waited" in next(r for r in responses if r.status_code == 503).json()["error"]["message"]


def test_probes_are_never_queued() -> None:
    inner = Slow(0.2)
    responses = asyncio.run(_burst(ConcurrencyLimit(inner, limit=1, queue=0, wait_s=10), 5, path="/healthz"))
    assert [r.status_code for r in responses] == [200] * 5 and inner.peak == 5


class SlowEncoder(FakeEncoder):
    """Slow enough that requests pile up inside the app, as they do behind a real model."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        time.sleep(0.05)
        return super().encode(texts)


@pytest.fixture
def served_app(data_dir: Path) -> Iterator[tuple[str, str]]:
    settings = Settings(data_dir=data_dir, database_url=f"sqlite:///{data_dir / 'tutor.db'}")
    encoder = SlowEncoder()
    ingest_with(settings, encoder)
    engine = make_engine(settings.db_url)
    with transaction(make_sessionmaker(engine)) as s:
        _, secret = create_key(s, name="load", rate_limit="100000/minute")
    engine.dispose()
    app = create_app(settings, lambda _: encoder, load_in_background=False)
    with serving_in_thread(app) as base:
        yield base, secret

def test_more_clients_than_connections_and_threads_are_all_answered(served_app: tuple[str, str]) -> None:
    """128 clients at once (the app has 40 threads and 40 connections): none hangs, none errs.

    Half of them grade (async: no worker thread, no connection held). The other half register a
    rubric: a sync route whose session takes a connection in the endpoint's worker thread (held
    through the slow encode) and commits in another hand-over to a worker thread. Without
    admission control this deadlocks: requests holding a connection wait for a thread to commit,
    while every thread runs a newer request that waits for a connection (checked by removing the
    middleware: the clients time out).
    """
    base, secret = served_app
    qid = httpx.get(f"{base}/v1/questions", params={"q": "reduce-scatter"}).json()["items"][0]["id"]
    codes: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(128)

    def client(i: int) -> None:
        with httpx.Client(base_url=base, headers={"X-API-Key": secret}, timeout=30) as http:
            start.wait()
            for j in range(2):
                try:
                    if i % 2:
                        rubric = {"question": f"What does reduce-scatter do? ({i} {j})",
                                  "reference_answers": ["each rank keeps one reduced chunk"]}
                        res = http.post("/v1/rubrics", json=rubric)
                    else:
                        res = http.post("/v1/grade", json={"question_id": qid, "answer": f"it scatters chunks {i} {j}"})
                except httpx.TimeoutException:
                    continue
                with lock:
                    codes.append(res.status_code)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(128)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "requests hung"
    assert len(codes) == 256 and set(codes) <= {200, 201, 503}
    assert codes.count(200) + codes.count(201) >= 200


def test_the_database_pool_matches_the_worker_threads(tmp_path: Path) -> None:
    """The admission limit's ceiling assumes one pooled connection per worker thread (anyio's default)."""

    async def tokens() -> float:
        return anyio.to_thread.current_default_thread_limiter().total_tokens

    assert anyio.run(tokens) == WORKER_THREADS
    engine = make_engine(f"sqlite:///{tmp_path / 'pool.db'}")
    assert engine.pool.size() == WORKER_THREADS  # type: ignore[attr-defined]
    engine.dispose()
