"""Start `tutor serve` processes for end-to-end tests and wait until they are ready."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

TUTOR = [sys.executable, "-m", "app.cli"]


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


@contextmanager
def serving(env: dict[str, str], timeout: float = 120) -> Iterator[str]:
    """A `tutor serve` process on a free port; yields its base URL once /readyz answers 200."""
    port = free_port()
    proc = subprocess.Popen(
        [*TUTOR, "serve", "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                raise RuntimeError(f"tutor serve exited: {proc.stderr.read() if proc.stderr else ''}")
            if time.monotonic() > deadline:
                raise TimeoutError("tutor serve did not become ready")
            time.sleep(0.3)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
