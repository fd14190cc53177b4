"""Start a real `tutor worker` process for tests, and wait for runs."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

TOKEN = "test-worker-token"
TUTOR = Path(sys.executable).with_name("tutor")


def free_port() -> int:
    """A TCP port nobody listens on (right now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start_worker(port: int, **env: str) -> subprocess.Popen[bytes]:
    """`tutor worker` on a port, CPU only, answering /healthz (or a failed test)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("TUTOR_")}
    full_env.update({"TUTOR_WORKER_TOKEN": TOKEN, "TUTOR_WORKER_DEVICE": "cpu", **env})
    proc = subprocess.Popen(
        [str(TUTOR), "worker", "--port", str(port)],
        env=full_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"tutor worker exited with {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("tutor worker did not start")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a worker started here."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for(get: Callable[[], dict[str, Any]], done: Callable[[dict[str, Any]], bool], limit: float = 150) -> Any:
    """Poll get() until done(value); the value (fails the test after `limit` seconds)."""
    deadline = time.monotonic() + limit
    while True:
        value = get()
        if done(value):
            return value
        assert time.monotonic() < deadline, f"gave up waiting: {value}"
        time.sleep(0.2)


def finished(view: dict[str, Any]) -> bool:
    """Whether a run view is terminal."""
    return view.get("status") in ("succeeded", "failed", "cancelled")


# an all-reduce sweep long enough (hundreds of 64 MiB all-reduces) to still be running when a test acts on it
LONG_RUN = {"min_bytes": 64 * 1024 * 1024, "max_bytes": 64 * 1024 * 1024, "iterations": 200, "warmup": 0}
