"""Slow clients cannot take the admission slots from everyone else.

Real sockets against a served app (uvicorn in a thread), with a small request limit so that a few slow
clients would be enough to fill it:

- bodies sent a byte at a time are read before admission, within the body timeout: they hold no slot,
  get 408 in the error shape once the time is up, and their connection is closed;
- open server-sent event streams (a demo run's events, the chat's stream) give their slot back once
  they start and count against the open-stream bounds instead: one too many from a client is 429, one
  too many in the process is 503, both in the error shape.
Meanwhile an ordinary request from another client is answered.
"""

from __future__ import annotations

import json
import select
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.config import Settings
from app.main import create_app
from contracts.jobs import JobQueue, queue_name, verify
from tests.app.chat.fake_demos import FakeDemoRunner
from tests.app.demos.helpers import author_key
from tests.conftest import ROOT, SEEDS, ingest_with
from tests.fakes import FakeEncoder
from tests.serving import serving_in_thread
from tests.worker.helpers import TOKEN

# Small enough that a few slow clients would fill it; the queue wait is short so that a request shut
# out by them is refused (503) rather than left waiting.
LIMIT = 4
QUEUE_WAIT_S = 5.0


@pytest.fixture(scope="module")
def bank(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A data folder and SQLite bank ingested once for these tests."""
    data = tmp_path_factory.mktemp("slow") / "data"
    shutil.copytree(SEEDS, data / "raw")
    for name in ("taxonomy.yaml", "annotations.yaml"):
        shutil.copy(ROOT / "data" / name, data / name)
    settings = Settings(data_dir=data, database_url=f"sqlite:///{data / 'tutor.db'}")
    ingest_with(settings, FakeEncoder())
    return settings


@contextmanager
def served(settings: Settings, **changes: Any) -> Iterator[tuple[FastAPI, str]]:
    """The app with the request limit above and `changes`, served on a free port; (app, base URL)."""
    limits = {"max_concurrent_requests": LIMIT, "queue_wait_s": QUEUE_WAIT_S, **changes}
    app = create_app(settings.model_copy(update=limits), lambda _: FakeEncoder(), load_in_background=False)
    with serving_in_thread(app) as base:
        yield app, base


def assert_ordinary_requests_answer(base: str) -> None:
    """A GET and a POST from a client of its own are answered (not queued out with 503)."""
    with httpx.Client(base_url=base, timeout=QUEUE_WAIT_S * 4) as http:
        listing = http.get("/v1/questions", params={"q": "all-reduce"})
        assert listing.status_code == 200, listing.text
        learner = http.post("/v1/learners", json={})
        assert learner.status_code == 201, learner.text


def assert_error(response: httpx.Response | Events, status: int, code: str) -> None:
    """A refusal in the project's error shape, with a Retry-After."""
    if isinstance(response, Events):
        response = response.response
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["message"] and isinstance(error["details"], dict)
    assert int(response.headers["retry-after"]) > 0


# 1. Slow bodies.


def _open_slow_body(port: int, path: str = "/v1/grade", length: int = 500) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n")
    sock.sendall(head.encode())
    return sock


class Trickle:
    """Sends one body byte every `every_s` seconds on each socket until it is answered or closed."""

    def __init__(self, socks: list[socket.socket], every_s: float) -> None:
        self.socks, self.every_s = socks, every_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        live = list(self.socks)
        while live and not self.stop.wait(self.every_s):
            for sock in list(live):
                readable, _, _ = select.select([sock], [], [], 0)
                if readable:  # answered (or closed): nothing more to send
                    live.remove(sock)
                    continue
                try:
                    sock.send(b" ")
                except OSError:
                    live.remove(sock)

    def __enter__(self) -> Trickle:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        for sock in self.socks:
            sock.close()


def _read_to_close(sock: socket.socket, timeout_s: float) -> tuple[bytes, bool]:
    """What the server sent, and whether it then closed the connection (False: still open at the timeout)."""
    sock.settimeout(timeout_s)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        return data, False
    except ConnectionResetError:  # closed while our last bytes were unread: the same for the client
        pass
    return data, True


def _error_code(response: bytes) -> str:
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), head
    assert b"connection: close" in head.lower(), head
    return str(json.loads(body)["error"]["code"])


def test_slow_bodies_time_out_without_holding_a_slot(bank: Settings) -> None:
    """32 clients sending a body byte every 0.5 s (8 times the request limit): others are still served."""
    with served(bank, body_timeout_s=2.0) as (_, base):
        port = int(base.rsplit(":", 1)[1])
        socks = [_open_slow_body(port) for _ in range(8 * LIMIT)]
        with Trickle(socks, every_s=0.5):
            time.sleep(1.0)  # every slow client is in and has sent some of its body
            assert_ordinary_requests_answer(base)
            outcomes = [_read_to_close(sock, timeout_s=30) for sock in socks]
        assert all(closed for _, closed in outcomes), "a slow body's connection was left open"
        answered = [data for data, _ in outcomes if data]
        assert answered, "no slow client was told why"
        assert {_error_code(data) for data in answered} == {"request_timeout"}
        assert_ordinary_requests_answer(base)


def test_the_body_timeout_is_the_configured_one(bank: Settings) -> None:
    with served(bank, body_timeout_s=1.0) as (_, base):
        sock = _open_slow_body(int(base.rsplit(":", 1)[1]), path="/v1/learners", length=10)
        sock.sendall(b"{")
        data, closed = _read_to_close(sock, timeout_s=30)
        sock.close()
        assert closed and _error_code(data) == "request_timeout"
        assert b"within 1 s" in data


def test_a_body_in_parts_within_the_timeout_is_served(bank: Settings) -> None:
    with served(bank, body_timeout_s=5.0) as (_, base):
        body = b'{"display_name": "slow but steady"}'
        sock = _open_slow_body(int(base.rsplit(":", 1)[1]), path="/v1/learners", length=len(body))
        for part in (body[:10], body[10:20], body[20:]):
            time.sleep(0.2)
            sock.sendall(part)
        sock.settimeout(30)
        head = sock.recv(65536)
        sock.close()
        assert head.startswith(b"HTTP/1.1 201 "), head


def test_a_chunked_body_over_the_limit_is_refused_while_it_arrives(bank: Settings) -> None:
    with served(bank, max_body_bytes=1024) as (_, base):
        sock = socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])), timeout=30)
        sock.sendall(b"POST /v1/learners HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        for _ in range(3):
            sock.sendall(b"200\r\n" + b" " * 512 + b"\r\n")
        data, _ = _read_to_close(sock, timeout_s=30)
        sock.close()
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 413 "), head
        assert json.loads(body)["error"]["code"] == "payload_too_large"


# 2. Open event streams.


class HeldWorker:
    """A demo worker as the API knows one: signed reports on the shared job queue (as `worker.consumer` sends
    them). It announces itself, takes the job the API queued, reports it running with a progress event, and
    keeps it in progress until `finish` reports its outcome."""

    ID = "held-worker"

    def __init__(self, jobs: JobQueue) -> None:
        self.jobs = jobs
        self.taken: list[dict[str, Any]] = []

    def _report(self, **body: Any) -> None:
        self.jobs.report({"v": 1, "worker": self.ID, "at": time.time(), **body})

    def announce(self) -> None:
        """A heartbeat: the worker takes runs of up to 2 ranks on the CPU."""
        self._report(type="heartbeat", name="held", hardware={"cpu_ranks": 2}, held=[], stopping=False,
                     queues=[queue_name("cpu", ranks) for ranks in (1, 2)])

    def take(self, run: dict[str, Any]) -> None:
        """Take the run's job off its queue, claim it, and report it running with one progress event."""
        data = self.jobs.take(queue_name(run["hardware_kind"], run["world_size"]))
        assert data is not None, f"no job on the queue for run {run['id']}"
        job = verify(self.jobs.token, data)
        this = {"job": job["job"], "attempt": job["attempt"]}
        self._report(type="claimed", hardware={"kind": "cpu", "label": "CPU, gloo", "backend": "gloo"}, **this)
        running = {"type": "status", "status": "running"}
        progress = {"type": "progress", "message": "working", "fraction": 0.5}
        for n, event in enumerate((running, progress)):
            self._report(type="event", seq=int(job["seq_base"]) + n, event=event, **this)
        self.taken.append(job)

    def finish(self) -> None:
        """Report every taken job succeeded (a repeated report changes nothing)."""
        for job in self.taken:
            self._report(type="done", job=job["job"], attempt=job["attempt"], status="succeeded", error=None,
                         result={"series": [], "charts": [], "notes": ["held"]}, pgid=None)


class HeldRunner(FakeDemoRunner):
    """The chat's fake demo runner, whose runs stay in progress until `release` is set."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__()
        self.release = release

    def events(self, run_id: str) -> Iterator[dict[str, Any]]:
        yield from super().events(run_id)
        self.release.wait(60)


def client_at(base: str, address: str, stack: ExitStack, headers: dict[str, str] | None = None) -> httpx.Client:
    """A client whose connections come from `address` (any 127.x.y.z is this machine)."""
    transport = httpx.HTTPTransport(local_address=address)
    return stack.enter_context(httpx.Client(base_url=base, transport=transport, headers=headers,
                                            timeout=QUEUE_WAIT_S * 4))


class Events:
    """An open event stream read up to its first progress event, or a refusal (read whole)."""

    def __init__(self, http: httpx.Client, stack: ExitStack, method: str, path: str, **kwargs: Any) -> None:
        self.response = stack.enter_context(http.stream(method, path, **kwargs))
        self.status_code = self.response.status_code
        if self.status_code != 200:
            self.response.read()
            return
        assert self.response.headers["content-type"].startswith("text/event-stream")
        # kept: dropping a half-read line iterator closes the connection
        self.lines = self.response.iter_lines()
        assert "event: progress" in self.lines

    def rest(self) -> list[str]:
        """The stream's remaining lines, to its end."""
        return list(self.lines)


def test_open_demo_event_streams_do_not_shut_others_out(bank: Settings, tmp_path: Path) -> None:
    """Per client at most 4 open streams, in the process 6 (more than the request limit of 4)."""
    queue = str(tmp_path / "queue.db")
    # the stand-in worker sends no heartbeat after its first: it is not counted lost while the test runs
    demos = {"worker_token": TOKEN, "demo_queue_url": queue, "demo_worker_timeout_s": 3600.0}
    key = {"X-API-Key": author_key(bank)}  # the run's requester; every stream is opened with it
    with served(bank, max_open_streams=6, max_open_streams_per_client=4, **demos) as (_, base), \
            ExitStack() as stack:
        jobs = JobQueue(queue, TOKEN)
        stack.callback(jobs.close)
        worker = HeldWorker(jobs)
        stack.callback(worker.finish)  # the run ends on the way out, whatever happened: its streams end
        local = client_at(base, "127.0.0.1", stack, key)
        worker.announce()
        _wait(lambda: local.get("/v1/demos").json()["available"], "the worker registering")
        run = local.post("/v1/demos/allreduce/runs", json={})
        assert run.status_code == 202, run.text
        worker.take(run.json())
        events = f"/v1/demos/runs/{run.json()['id']}/events"
        # a stream refused (no such run) does not stay counted
        assert [local.get("/v1/demos/runs/nope/events").status_code for _ in range(6)] == [404] * 6

        streams = [Events(local, stack, "GET", events) for _ in range(4)]
        assert [s.status_code for s in streams] == [200] * 4
        assert_ordinary_requests_answer(base)
        assert local.get(f"/v1/demos/runs/{run.json()['id']}").json()["status"] == "running"

        assert_error(Events(local, stack, "GET", events), 429, "rate_limited")  # the client's fifth
        other = client_at(base, "127.0.0.2", stack, key)
        others = [Events(other, stack, "GET", events) for _ in range(2)]
        assert [s.status_code for s in others] == [200, 200]
        third = client_at(base, "127.0.0.3", stack, key)
        assert_error(Events(third, stack, "GET", events), 503, "overloaded")  # the process's seventh
        assert_ordinary_requests_answer(base)

        streams[0].response.close()  # a client leaves: its stream no longer counts
        for _ in range(100):
            reopened = Events(third, stack, "GET", events)
            if reopened.status_code == 200:
                break
            assert_error(reopened, 503, "overloaded")
            time.sleep(0.1)
        assert reopened.status_code == 200

        worker.finish()  # the run ends: each stream finishes with its result
        for stream in (streams[1], others[0], reopened):
            rest = stream.rest()
            assert "event: done" in rest, rest
            done = json.loads(rest[rest.index("event: done") + 1].removeprefix("data: "))
            assert done["status"] == "succeeded" and done["result"]["notes"] == ["held"], done


def _wait(probe: Callable[[], Any], what: str, limit: float = 30) -> None:
    """Poll probe() until it is true (or fail naming `what`)."""
    deadline = time.monotonic() + limit
    while not probe():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def test_open_chat_streams_do_not_shut_others_out(bank: Settings) -> None:
    release = threading.Event()
    with served(bank, max_open_streams=6, max_open_streams_per_client=4) as (app, base), ExitStack() as stack:
        stack.callback(release.set)
        app.state.demo_runner = HeldRunner(release)
        local = client_at(base, "127.0.0.1", stack)
        turn = {"message": "run the allreduce demo"}

        streams = [Events(local, stack, "POST", "/v1/chat/stream", json=turn) for _ in range(4)]
        assert [s.status_code for s in streams] == [200] * 4
        assert_ordinary_requests_answer(base)
        assert_error(Events(local, stack, "POST", "/v1/chat/stream", json=turn), 429, "rate_limited")

        release.set()
        assert "event: done" in streams[0].rest()
