"""`scripts/gpu_check` runs demos through the job queue (here on CPU with gloo: no GPU on this machine)."""

from __future__ import annotations

import pytest

from worker.gpu_check import main


def test_gpu_check_runs_demos_through_the_queue(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--cpu", "sampler"]) == 0
    out = capsys.readouterr().out
    assert "sampler: backend gloo" in out and "on CPU, gloo, 2 ranks" in out
