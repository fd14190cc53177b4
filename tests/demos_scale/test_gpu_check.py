"""`scripts/gpu_check` runs demos through the job queue (here on CPU with gloo: no GPU on this machine)."""

from __future__ import annotations

import pytest

from worker.gpu_check import main


def test_gpu_check_runs_demos_through_the_queue(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--cpu", "sampler"]) == 0
    out = capsys.readouterr().out
    assert "sampler: backend gloo" in out and "on CPU, gloo, 2 ranks" in out


def test_a_one_gpu_host_runs_single_device_demos_on_it_and_the_rest_on_cpu_ranks() -> None:
    from worker.devices import DeviceInfo
    from worker.gpu_check import check_params

    cpu = check_params(DeviceInfo("cpu", [], 2, 2))
    one = check_params(DeviceInfo("cuda", ["NVIDIA H200"], 16, 8))
    eight = check_params(DeviceInfo("cuda", ["NVIDIA H100 80GB HBM3"] * 8, 16, 8))
    single = {"matmul", "mixed_precision", "checkpointing"}
    assert {name for name in one if one[name] != cpu[name]} == single  # GPU-sized only where one GPU is enough
    assert all(eight[name] != cpu[name] for name in eight)
    assert eight["allreduce"]["world_size"] == 8
