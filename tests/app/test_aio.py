"""Awaiting the encoder's workers from the event loop: results, no-batcher fallback, cancelled waits."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np

from app.aio import encode
from ingest.batching import BatchingEncoder
from tests.fakes import FakeEncoder


def test_encode_through_the_batcher_and_without_it() -> None:
    texts = ["ring all-reduce", "pipeline bubble"]
    expected = FakeEncoder().encode(texts)
    batcher = BatchingEncoder(FakeEncoder(), max_wait_ms=0)
    assert np.allclose(asyncio.run(encode(batcher, texts)), expected)
    batcher.close()
    assert np.allclose(asyncio.run(encode(FakeEncoder(), texts)), expected)  # plain encoder: a worker thread
    assert asyncio.run(encode(FakeEncoder(), [])).shape == (0, FakeEncoder().dim)


def test_a_cancelled_wait_leaves_the_batch_and_the_workers_intact() -> None:
    release = threading.Event()

    class Held(FakeEncoder):
        def encode(self, texts: Sequence[str]) -> np.ndarray:
            release.wait(5)
            return super().encode(texts)

    batcher = BatchingEncoder(Held(), max_wait_ms=0)

    async def scenario() -> np.ndarray:
        gone = asyncio.create_task(encode(batcher, ["client went away"]))
        stays = asyncio.create_task(encode(batcher, ["client still here"]))
        await asyncio.sleep(0.05)
        gone.cancel()
        release.set()
        return await asyncio.wait_for(stays, 5)

    vec = asyncio.run(scenario())
    assert np.allclose(vec, FakeEncoder().encode(["client still here"]))
    # The worker set the cancelled caller's result without failing, and still serves.
    assert np.allclose(batcher.submit(["next"]).result(timeout=5), FakeEncoder().encode(["next"]))
    batcher.close()
