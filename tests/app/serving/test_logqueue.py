"""Logging off the event loop: records are written by a listener thread, in the handler's own format."""

from __future__ import annotations

import io
import logging
import re
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
from uvicorn.logging import AccessFormatter

from app.serving.logqueue import log_off_the_loop
from tests.serving import TUTOR, free_port


class _Recording(logging.StreamHandler):  # type: ignore[type-arg]
    def __init__(self, stream: io.StringIO) -> None:
        super().__init__(stream)
        self.threads: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        self.threads.add(threading.current_thread().name)
        super().emit(record)


def test_records_are_written_by_a_listener_in_the_handlers_format() -> None:
    out = io.StringIO()
    handler = _Recording(out)
    handler.setFormatter(AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s', use_colors=False))
    logger = logging.getLogger("test.access.queue")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    listeners = log_off_the_loop(["test.access.queue"])
    try:
        assert len(listeners) == 1 and handler not in logger.handlers
        logger.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5000", "POST", "/v1/grade", "1.1", 200)
    finally:
        for listener in listeners:
            listener.stop()  # flushes the queue
        logger.handlers.clear()
    assert out.getvalue().strip() == '127.0.0.1:5000 - "POST /v1/grade HTTP/1.1" 200 OK'
    assert handler.threads and threading.current_thread().name not in handler.threads


def test_serve_exits_non_zero_when_the_port_is_taken(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {"TUTOR_DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
        proc = subprocess.run([*TUTOR, "serve", "--port", str(port)], env=env, capture_output=True, text=True,
                              timeout=120)
    assert proc.returncode == 3
    assert "address already in use" in proc.stderr.lower()


class _Blocked(logging.Handler):
    """A handler whose output is stuck until released (a pipe nobody drains)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.gate.wait(30)
        self.lines.append(record.getMessage())


def test_a_blocked_output_drops_records_beyond_the_bound_and_says_how_many() -> None:
    handler = _Blocked()
    logger = logging.getLogger("test.blocked.queue")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    (listener,) = log_off_the_loop(["test.blocked.queue"], max_queued=10)
    try:
        for i in range(100):  # never blocks, though nothing is written
            logger.info("record %d", i)
        queued = logger.handlers[0]
        assert queued.queue.qsize() <= 10  # type: ignore[attr-defined]
        assert queued.dropped >= 80  # type: ignore[attr-defined]
        handler.gate.set()
        listener.stop()  # writes what was queued
        listener.start()
        logger.info("after")
    finally:
        listener.stop()
        logger.handlers.clear()
    notices = [line for line in handler.lines if "log records were dropped" in line]
    assert len(notices) == 1 and handler.lines[-2:] == [notices[0], "after"]
    kept = [line for line in handler.lines if line.startswith("record")]
    dropped = int(notices[0].split()[0])
    assert len(kept) + dropped == 100


def test_serve_logs_the_projects_own_records_with_their_names(tmp_path: Path) -> None:
    """An empty data folder: the runtime logs why it is not ready, as `ERROR: app.serving.runtime: ...`."""
    port = free_port()
    env = {"TUTOR_DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen([*TUTOR, "serve", "--port", str(port)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2)
                if ready.status_code == 503 and "loading" not in ready.text and "starting" not in ready.text:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=60)
    assert re.search(r"ERROR:\s+app\.serving\.runtime: not ready: ", stderr), stderr
    assert "Uvicorn running on" in stderr  # uvicorn's own lines still come through
    # Each request logged once, by the app after its response (app.serving.accesslog), with its duration.
    lines = [line for line in stderr.splitlines() if '"GET /readyz HTTP/1.1"' in line]
    assert lines and all(re.fullmatch(r'INFO:\s+127\.0\.0\.1:\d+ - "GET /readyz HTTP/1\.1" \d{3} [A-Za-z ]+ '
                                      r'\d+\.\d ms', line) for line in lines), lines
    clients = [line.split()[1] for line in lines]  # one connection per request: once each
    assert len(clients) == len(set(clients)), lines
