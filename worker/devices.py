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
    """What the worker offers: CUDA devices (names) or none, and the largest gloo run on its CPU (ranks)."""

    kind: Literal["cuda", "cpu"]
    gpus: list[str] = field(default_factory=list)
    cpu_count: int = 1
    cpu_ranks: int = 8

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


def detect(mode: str, cpu_ranks: int | None = None, max_gpus: int | None = None) -> DeviceInfo:
    """The CUDA devices visible to this process (at most max_gpus), unless mode is 'cpu'.

    cpu_ranks: the largest gloo run offered on the CPU (default: the cores, between 2 and 8).
    """
    import os

    cpus = os.cpu_count() or 1
    ranks = cpu_ranks if cpu_ranks is not None else min(max(cpus, 2), 8)
    if mode == "cpu":
        return DeviceInfo("cpu", [], cpus, ranks)
    import torch

    if not torch.cuda.is_available():
        return DeviceInfo("cpu", [], cpus, ranks)
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())][:max_gpus]
    return DeviceInfo("cuda", names, cpus, ranks) if names else DeviceInfo("cpu", [], cpus, ranks)


def place(info: DeviceInfo, world_size: int, free: set[str], want: str | None = None) -> Placement | None:
    """A placement for a run of `world_size` ranks using only free slots, or None to keep it queued.

    want: 'cuda' or 'cpu' when the run was queued for that kind of device (a job); None (a local run): NCCL
    when the host has enough GPUs, otherwise CPU processes.
    """
    gpus_fit = info.kind == "cuda" and len(info.gpus) >= world_size
    if want == "cuda" or (want is None and gpus_fit):
        if not gpus_fit:
            return None
        ids = [i for i in range(len(info.gpus)) if f"cuda:{i}" in free]
        return Placement("cuda", tuple(ids[:world_size]), world_size) if len(ids) >= world_size else None
    if want == "cpu" and world_size > info.cpu_ranks:
        return None
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


def _versions(cuda: bool) -> tuple[str | None, str | None]:
    """(torch version, NCCL version) without importing torch on a CPU-only worker."""
    from importlib import metadata

    try:
        torch_version: str | None = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = None
    if not cuda:
        return torch_version, None
    try:
        import torch

        nccl = torch.cuda.nccl.version()
        return torch_version, ".".join(str(p) for p in nccl) if isinstance(nccl, tuple) else str(nccl)
    except Exception:
        return torch_version, None


def interconnect(gpus: int) -> str:
    """How the host's GPUs talk: 'NVLink' when `nvidia-smi topo -m` shows NV links, else 'PCIe'."""
    import shutil
    import subprocess

    if gpus < 2:
        return "single GPU"
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return "PCIe or unknown"
    try:
        topo = subprocess.run([binary, "topo", "-m"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "PCIe or unknown"
    return "NVLink" if any(tok.startswith("NV") and tok[2:].isdigit() for tok in topo.split()) else "PCIe"


def hardware(info: DeviceInfo) -> dict[str, Any]:
    """The worker's hardware description, as runs and results record it."""
    from contracts.jobs import hardware_kind

    cuda = info.kind == "cuda"
    torch_version, nccl = _versions(cuda)
    model = info.gpus[0] if cuda else None
    return {
        "gpu_model": model,
        "gpu_count": len(info.gpus),
        "interconnect": interconnect(len(info.gpus)) if cuda else None,
        "torch": torch_version,
        "nccl": nccl,
        "cpu_count": info.cpu_count,
        "cpu_ranks": info.cpu_ranks,
        "gpu_kind": hardware_kind("cuda", model) if cuda else None,
    }


def run_hardware(described: dict[str, Any], kind: str, world_size: int) -> dict[str, Any]:
    """What one run ran on: its kind ('cpu' or 'cuda_<model>') and a label such as '8 × H100, NVLink'."""
    if kind == "cpu":
        ranks = f", {world_size} ranks" if world_size > 1 else ""
        return {"kind": "cpu", "label": f"CPU, gloo{ranks}", "backend": "gloo", "torch": described.get("torch")}
    label = f"{world_size} × {described.get('gpu_model')}"
    if world_size > 1:
        label += f", {described.get('interconnect')}"
    versions = [f"torch {described.get('torch')}"] + ([f"NCCL {described['nccl']}"] if described.get("nccl") else [])
    return {
        "kind": kind,
        "label": f"{label} ({', '.join(versions)})",
        "backend": "nccl" if world_size > 1 else "cuda",
        "gpu_model": described.get("gpu_model"),
        "gpu_count": world_size,
        "interconnect": described.get("interconnect"),
        "torch": described.get("torch"),
        "nccl": described.get("nccl"),
    }


def offered(info: DeviceInfo) -> list[tuple[str, str, int]]:
    """The queues this worker can place: (queue name, hardware kind, world size), GPUs first."""
    from contracts.jobs import hardware_kind, queue_name

    found = []
    if info.kind == "cuda" and info.gpus:
        kind = hardware_kind("cuda", info.gpus[0])
        found += [(queue_name(kind, n), kind, n) for n in range(1, len(info.gpus) + 1)]
    found += [(queue_name("cpu", n), "cpu", n) for n in range(1, info.cpu_ranks + 1)]
    return found
