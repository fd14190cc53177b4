"""Real processes on CPU with gloo: API processes (uvicorn, fake encoder) and `tutor worker` processes sharing a
job queue (SQLite file, or the local Redis), each test with its own database and queue."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config import Settings
from app.db import make_engine, make_sessionmaker, transaction
from app.keys.service import create_key
from tests.conftest import ROOT, SEEDS, ingest_with
from tests.fakes import FakeEncoder
from tests.worker.helpers import TOKEN, free_port, wait_for

FAST = {  # timeouts short enough for tests: a lost worker is noticed within 3 s
    "TUTOR_DEMO_WORKER_TIMEOUT_S": "3",
    "TUTOR_DEMO_WATCH_S": "4",
    "TUTOR_DEMO_MAX_QUEUE": "64",
    "TUTOR_DEMO_MAX_LIVE_PER_KEY": "16",
    "TUTOR_DEMO_RATE_LIMIT": "1000/minute",
    "TUTOR_ANONYMOUS_CHAT_RATE_LIMIT": "1000/minute",
}


@dataclass
class Site:
    """One study site: its settings, API processes and workers, and an author key."""

    settings: Settings
    env: dict[str, str]
    author: str = ""
    apis: list[tuple[subprocess.Popen[bytes], str]] = field(default_factory=list)
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start_api(self, wait: bool = True) -> str:
        """An API process; its base URL (once /healthz answers, unless wait is False)."""
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "tests.demos_scale.api_process", str(port)], cwd=ROOT,
                                env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        self.apis.append((proc, base))
        if wait:
            self.wait_api(base)
        return base

    def wait_api(self, base: str) -> None:
        """Wait until the API process at base answers /healthz."""
        proc = next(p for p, url in self.apis if url == base)
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, "the API process exited"
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the API did not start"
            time.sleep(0.2)

    def kill_api(self, base: str) -> None:
        """SIGKILL an API process."""
        for proc, url in self.apis:
            if url == base:
                proc.kill()
                proc.wait()

    def start_worker(self, ranks: int, name: str, token: str = TOKEN) -> subprocess.Popen[bytes]:
        """A CPU worker (`python -m worker`) offering gloo runs of up to `ranks` ranks; it registers by itself."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TUTOR_")}
        env.update(TUTOR_WORKER_TOKEN=token, TUTOR_WORKER_DEVICE="cpu", TUTOR_WORKER_QUEUE_URL=self.settings.demo_queue,
                   TUTOR_WORKER_CPU_RANKS=str(ranks), TUTOR_WORKER_NAME=name, TUTOR_WORKER_HEARTBEAT_S="0.5")
        proc = subprocess.Popen([sys.executable, "-m", "worker", "--port", str(free_port())], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.workers.append(proc)
        return proc

    def client(self, base: str, **headers: str) -> httpx.Client:
        """An HTTP client of an API process (author key unless headers say otherwise)."""
        return httpx.Client(base_url=base, timeout=30, headers=headers or {"X-API-Key": self.author})


def _author_key(settings: Settings) -> str:
    engine = make_engine(settings.db_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            _, secret = create_key(session, name="scale tests", scopes=("grade", "author"), rate_limit="100000/minute")
    finally:
        engine.dispose()
    return secret


def _build(data: Path, queue: str = "sqlite", database_url: str | None = None, **extra: str) -> Site:
    shutil.copytree(SEEDS, data / "raw")
    for name in ("taxonomy.yaml", "annotations.yaml"):
        shutil.copy(ROOT / "data" / name, data / name)
    queue_url = str(data / "queue.db")
    if queue == "redis":
        queue_url = "redis://127.0.0.1:6379/13"
        import redis

        redis.Redis.from_url(queue_url).flushdb()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUTOR_")}
    env.update(FAST, TUTOR_DATA_DIR=str(data), TUTOR_WORKER_TOKEN=TOKEN, TUTOR_DEMO_QUEUE_URL=queue_url,
               TUTOR_JOURNAL="false", TUTOR_RELOAD_S="0", **extra)
    if database_url:
        env["TUTOR_DATABASE_URL"] = database_url
    settings = Settings(data_dir=data, worker_token=TOKEN, demo_queue_url=queue_url, database_url=database_url)
    ingest_with(settings, FakeEncoder())
    site = Site(settings, env)
    site.author = _author_key(settings)
    return site


def _end(site: Site) -> None:
    for proc in [*site.workers, *(p for p, _ in site.apis)]:
        if proc.poll() is None:
            proc.terminate()
    for proc in [*site.workers, *(p for p, _ in site.apis)]:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def make_site(tmp_path: Path) -> Iterator[Callable[..., Site]]:
    """Build a site (database ingested, queue empty); every process it started is stopped afterwards."""
    sites: list[Site] = []

    def build(queue: str = "sqlite", database_url: str | None = None, **extra: str) -> Site:
        sites.append(_build(tmp_path / f"site{len(sites)}", queue, database_url, **extra))
        return sites[-1]

    yield build
    for site in sites:
        _end(site)


@pytest.fixture(scope="module")
def shared_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Site, str]]:
    """One site for the tests that kill nothing: workers offering 2 and 4 CPU ranks, a worker with a wrong
    token, one API process (all started at once); its base URL."""
    site = _build(tmp_path_factory.mktemp("shared") / "data")
    base = site.start_api(wait=False)
    site.start_worker(2, "small")
    site.start_worker(4, "large")
    site.start_worker(2, "impostor", token="not-the-token")
    site.wait_api(base)
    yield site, base
    _end(site)


def workers_live(http: httpx.Client, count: int) -> list[dict[str, Any]]:
    """Wait until `count` workers are live; their catalogue entries."""
    body = wait_for(lambda: http.get("/v1/demos").json(), lambda b: len(b["workers"]) >= count, limit=60)
    return list(body["workers"])
