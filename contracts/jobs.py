"""The demo job queue the API and the workers share: queue names, signed messages, and the Huey storages.

The API puts a signed job on the queue of its placement class (`queue_name`); a worker takes jobs only from
the queues it can place and sends back signed reports (its heartbeat, a claim, events, the outcome) on the
`reports` queue, which every API process drains into the database. Cancellation is a flag in the queue's
key-value store that the worker holding the run polls.

Storage: Huey's SQLite storage (one file; the one-machine default, no server) or its Redis storage
(`redis://...`, for deployments). Huey's storages give an atomic dequeue (two consumers never take the same
message), FIFO order, and a key-value store, on either backend with one interface. Messages are JSON, never
pickle, and carry an HMAC-SHA256 of the shared worker token: a message without a valid signature is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import sys
import time
from pathlib import Path
from typing import Any


def _import_huey_storage() -> None:
    """Import `huey.storage` without psycopg. Huey's storage module imports psycopg, where it is installed,
    for a PostgreSQL storage this queue never uses, and psycopg costs a serving process on the SQLite
    default about 9 MB resident (`python bench/compare_commits.py`). A None in `sys.modules` makes that
    one import fail as if psycopg were absent; the entry is removed at once, so SQLAlchemy and anything
    else still import psycopg normally."""
    if "huey.storage" in sys.modules or "psycopg" in sys.modules:
        return
    sys.modules["psycopg"] = None  # type: ignore[assignment]
    try:
        import huey.storage  # noqa: F401
    finally:
        del sys.modules["psycopg"]


_import_huey_storage()

from huey.storage import EmptyData, RedisStorage, SqliteStorage  # noqa: E402

REPORTS = "demo_reports"
CONTROL = "demo_control"
JOB_VERSION = 1


class BadMessage(ValueError):
    """A message whose signature does not verify, or that is not one of ours."""


def slug(text: str) -> str:
    """A queue-name-safe form of a device name: lower case letters, digits and underscores."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "unknown"


def hardware_kind(device: str, gpu_model: str | None = None) -> str:
    """The kind of hardware a result is measured on: 'cpu', or 'cuda_<gpu model>'."""
    return "cpu" if device == "cpu" else f"cuda_{slug(gpu_model or 'gpu')}"


def queue_name(kind: str, world_size: int) -> str:
    """The queue of runs of `world_size` ranks on hardware of `kind` (e.g. demo_cpu_2, demo_cuda_h100_8)."""
    return f"demo_{kind}_{world_size}"


def canonical(body: dict[str, Any]) -> bytes:
    """The bytes a signature covers: sorted keys, no spaces, UTF-8."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def _signature(token: str, payload: bytes) -> str:
    return hmac.new(hashlib.sha256(b"tutor-demo-queue:" + token.encode()).digest(), payload, "sha256").hexdigest()


def sign(token: str, body: dict[str, Any]) -> bytes:
    """A signed message: {"body": ..., "sig": hex HMAC of the canonical body}."""
    payload = canonical(body)
    return b'{"sig":"' + _signature(token, payload).encode() + b'","body":' + payload + b"}"


def verify(token: str, data: bytes | memoryview | str) -> dict[str, Any]:
    """The body of a signed message, or BadMessage when it is not valid JSON or not signed with the token."""
    raw = bytes(data) if not isinstance(data, str) else data.encode()
    try:
        message = json.loads(raw)
        body, sig = message["body"], str(message["sig"])
    except (ValueError, KeyError, TypeError) as exc:
        raise BadMessage("not a demo queue message") from exc
    if not isinstance(body, dict) or not hmac.compare_digest(sig, _signature(token, canonical(body))):
        raise BadMessage("the message's signature does not match the worker token")
    return body


def job_body(
    *, job_id: str, attempt: int, demo: str, params: dict[str, Any], world_size: int, kind: str,
    seq_base: int, expires_at: float,
) -> dict[str, Any]:
    """What a worker needs to run one attempt of a job."""
    return {
        "v": JOB_VERSION, "type": "job", "job": job_id, "attempt": attempt, "demo": demo, "params": params,
        "world_size": world_size, "kind": kind, "seq_base": seq_base, "queued_at": time.time(),
        "expires_at": expires_at,
    }


def _storage(url: str, name: str) -> SqliteStorage | RedisStorage:
    if url.startswith(("redis://", "rediss://", "unix://")):
        from redis import ConnectionPool

        pool = ConnectionPool.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        return RedisStorage(name=name, connection_pool=pool, blocking=False)
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else url
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return SqliteStorage(name=name, filename=path, strict_fifo=True, timeout=30)


class JobQueue:
    """The shared queue: jobs by placement class, reports, and cancellation flags, all signed with `token`."""

    def __init__(self, url: str, token: str) -> None:
        if not token:
            raise ValueError("the demo queue needs the worker token (TUTOR_WORKER_TOKEN) to sign its messages")
        self.url, self.token = url, token
        self._queues: dict[str, SqliteStorage | RedisStorage] = {}

    @property
    def backend(self) -> str:
        """'redis' or 'sqlite'."""
        return "redis" if self.url.startswith(("redis://", "rediss://", "unix://")) else "sqlite"

    def storage(self, name: str) -> SqliteStorage | RedisStorage:
        """The Huey storage of one queue (made once)."""
        store = self._queues.get(name)
        if store is None:
            store = self._queues[name] = _storage(self.url, name)
        return store

    # jobs
    def put_job(self, queue: str, body: dict[str, Any]) -> None:
        """Queue a signed job."""
        self.storage(queue).enqueue(sign(self.token, body))

    def head(self, queue: str) -> bytes | None:
        """The next message of a queue without taking it."""
        items = self.storage(queue).enqueued_items(1)
        return bytes(items[0]) if items else None

    def take(self, queue: str) -> bytes | None:
        """Take the next message of a queue (atomic: one consumer gets it), or None."""
        data = self.storage(queue).dequeue()
        return bytes(data) if data is not None else None

    def size(self, queue: str) -> int:
        """Messages waiting on a queue."""
        return int(self.storage(queue).queue_size())

    # reports
    def report(self, body: dict[str, Any]) -> None:
        """Send a signed report to the API processes."""
        self.storage(REPORTS).enqueue(sign(self.token, body))

    def next_report(self) -> bytes | None:
        """Take the next report (atomic across API processes), or None."""
        return self.take(REPORTS)

    # cancellation
    def revoke(self, job_id: str) -> None:
        """Flag a job as cancelled: a worker drops it when it takes it, or ends it while it runs."""
        self.storage(CONTROL).put_data(f"revoked:{job_id}", b"1")

    def revoked(self, job_id: str) -> bool:
        """Whether a job has been cancelled."""
        return self.storage(CONTROL).peek_data(f"revoked:{job_id}") is not EmptyData

    def forget(self, job_id: str) -> None:
        """Drop a job's cancellation flag (once it has ended)."""
        self.storage(CONTROL).pop_data(f"revoked:{job_id}")

    def close(self) -> None:
        """Close the storages' connections."""
        for store in self._queues.values():
            closer = getattr(store, "close", None)
            if callable(closer):
                closer()
        self._queues.clear()
