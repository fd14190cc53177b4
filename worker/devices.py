"""The worker's devices, where a run is placed, and the published peaks the figures are compared with."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

# Dense matmul peaks in TFLOPS by GPU name fragment (vendor datasheets, no sparsity): bf16/fp16, fp32 (no TF32).
MATMUL_PEAK_TFLOPS: dict[str, dict[str, float]] = {
    "H200": {"bfloat16": 989.0, "float16": 989.0, "float32": 67.0},
    "H100 PCIe": {"bfloat16": 756.0, "float16": 756.0, "float32": 51.0},
    "H100": {"bfloat16": 989.0, "float16": 989.0, "float32": 67.0},
    "A100": {"bfloat16": 312.0, "float16": 312.0, "float32": 19.5},
    "L40S": {"bfloat16": 362.0, "float16": 362.0, "float32": 91.6},
    "L4": {"bfloat16": 121.0, "float16": 121.0, "float32": 30.3},
    "A10": {"bfloat16": 125.0, "float16": 125.0, "float32": 31.2},
    "V100": {"float16": 125.0, "float32": 15.7},
    "T4": {"float16": 65.0, "float32": 8.1},
}
# NVLink bandwidth per GPU, one direction, GB/s: what all-reduce bus bandwidth can approach.
LINK_PEAK_GBPS: dict[str, float | None] = {
    "H200": 450.0,
    "H100 PCIe": None,
    "H100": 450.0,
    "A100": 300.0,
    "V100": 150.0,
}


@dataclass(frozen=True)
class DeviceInfo:
    """What the worker found: CUDA devices (names) or none."""

    kind: Literal["cuda", "cpu"]
    gpus: list[str] = field(default_factory=list)
    cpu_count: int = 1

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready description."""
        return asdict(self)


@dataclass(frozen=True)
class Placement:
    """Where one run executes: cuda device ids (NCCL when multi-rank) or CPU processes (gloo)."""

    kind: Literal["cuda", "cpu"]
    ids: tuple[int, ...]
    world_size: int

    @property
    def slots(self) -> tuple[str, ...]:
        """The queue slots this run holds: one per GPU, or the single CPU slot."""
        return tuple(f"cuda:{i}" for i in self.ids) if self.kind == "cuda" else ("cpu",)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready description (sent to the run process)."""
        return {"kind": self.kind, "ids": list(self.ids), "world_size": self.world_size}


def detect(mode: str) -> DeviceInfo:
    """The CUDA devices visible to this process, unless mode is 'cpu'."""
    import os

    cpus = os.cpu_count() or 1
    if mode == "cpu":
        return DeviceInfo("cpu", [], cpus)
    import torch

    if not torch.cuda.is_available():
        return DeviceInfo("cpu", [], cpus)
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return DeviceInfo("cuda", names, cpus)


def place(info: DeviceInfo, world_size: int, free: set[str]) -> Placement | None:
    """A placement for a run of `world_size` ranks using only free slots, or None to keep it queued.

    Multi-rank runs use NCCL only when the host has enough GPUs; otherwise they run as CPU processes.
    """
    if info.kind == "cuda" and len(info.gpus) >= world_size:
        ids = [i for i in range(len(info.gpus)) if f"cuda:{i}" in free]
        return Placement("cuda", tuple(ids[:world_size]), world_size) if len(ids) >= world_size else None
    return Placement("cpu", (), world_size) if "cpu" in free else None


def all_slots(info: DeviceInfo) -> set[str]:
    """Every slot of the host: one per GPU plus one for CPU runs."""
    return {f"cuda:{i}" for i in range(len(info.gpus))} | {"cpu"}


def lookup(table: dict[str, Any], name: str) -> Any:
    """The first table entry whose key occurs in the device name (tables list specific names first)."""
    for key, value in table.items():
        if key in name:
            return value
    return None
