"""Run one ingestion and SIGKILL it at a chosen point (used by test_crash_safety)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import ingest.pipeline as pipeline
from app.config import Settings
from tests.conftest import ingest_with
from tests.fakes import FakeEncoder


def _die(*_: Any, **__: Any) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main(db_url: str, data_dir: str, stage: str) -> None:
    """Ingest data_dir/raw with the fake encoder, dying at `stage`."""
    encoder = FakeEncoder()
    if stage == "embed":
        encoder.encode = _die  # type: ignore[method-assign]
    elif stage == "index":
        real_write = pipeline.write_index

        def write_then_die(*args: Any, **kwargs: Any) -> str:
            real_write(*args, **kwargs)
            _die()
            return ""

        pipeline.write_index = write_then_die  # type: ignore[assignment]
    elif stage == "commit":
        pipeline._set_state = _die  # inside the bank transaction, before it commits
    elif stage == "cleanup":
        pipeline.remove_other_versions = _die  # after the commit
    ingest_with(Settings(data_dir=Path(data_dir), database_url=db_url), encoder)


if __name__ == "__main__":
    main(*sys.argv[1:4])
