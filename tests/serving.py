"""Start `tutor serve` processes for end-to-end tests and wait until they are ready."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

TUTOR = [sys.executable, "-m", "app.cli.launch"]


def free_port() -> int:
    """An unused loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_tutor(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run one `tutor` command to completion."""
    proc = subprocess.run([*TUTOR, *args], env=env, capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def wait_ready(
    base: str, timeout: float, alive: Callable[[], str | None] = lambda: None, poll_s: float = 0.1
) -> None:
    """Poll /readyz every poll_s until it answers 200; `alive` returns why the server is gone, if it is."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if (gone := alive()) is not None:
            raise RuntimeError(gone)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{base} did not become ready")
        time.sleep(poll_s)


@contextmanager
def serving_in_thread(app: Any, port: int | None = None, timeout: float = 60) -> Iterator[str]:
    """An app served by uvicorn in a thread of this process (on a free port unless given); yields its URL once ready."""
    import uvicorn

    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, timeout)
        yield base
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@contextmanager
def serving(env: dict[str, str], timeout: float = 120) -> Iterator[str]:
    """A `tutor serve` process on a free port; yields its base URL once /readyz answers 200."""
    port = free_port()
    proc = subprocess.Popen(
        [*TUTOR, "serve", "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    base = f"http://127.0.0.1:{port}"

    def alive() -> str | None:
        if proc.poll() is None:
            return None
        return f"tutor serve exited: {proc.stderr.read() if proc.stderr else ''}"

    try:
        wait_ready(base, timeout, alive)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
