"""A real `tutor worker` process (CPU, queue of 1) shared by this folder's service tests."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.worker.helpers import TOKEN, free_port, start_worker, stop


@pytest.fixture(scope="module")
def worker_url() -> Iterator[str]:
    """The base URL of a worker started for this module."""
    port = free_port()
    proc = start_worker(port, TUTOR_WORKER_MAX_QUEUE="1")
    yield f"http://127.0.0.1:{port}"
    stop(proc)


@pytest.fixture
def http(worker_url: str) -> Iterator[httpx.Client]:
    """An HTTP client of the worker carrying its token."""
    with httpx.Client(base_url=worker_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10) as client:
        yield client
