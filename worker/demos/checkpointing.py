"""Activation checkpointing: memory kept for backward and step time, with and without torch.utils.checkpoint.

Memory is the bytes autograd keeps for backward after the forward pass (parameters excluded), counted with
saved_tensors_hooks; on CUDA the allocator's peak is reported too. CPU has no allocator statistics in torch,
so on CPU only the saved-tensor count is given (it includes neither the recomputation's transient block nor
allocator overhead).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from worker.charts import bar_chart
from worker.child import DemoContext
from worker.params import CheckpointingParams


class _Stack(nn.Module):
    def __init__(self, p: CheckpointingParams) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(p.hidden, p.hidden), nn.GELU(), nn.Linear(p.hidden, p.hidden))
            for _ in range(p.layers)
        )
        self.checkpointed = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Residual blocks, each optionally checkpointed."""
        for block in self.blocks:
            x = x + (checkpoint(block, x, use_reentrant=False) if self.checkpointed else block(x))
        return x


def _measure(model: _Stack, p: CheckpointingParams, device: torch.device) -> dict[str, Any]:
    params = {q.data_ptr() for q in model.parameters()}
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(p.batch, p.hidden, device=device)
    times, saved = [], 0
    gpu_peaks = []
    for step in range(p.steps + 1):
        seen: dict[int, int] = {}

        def pack(t: torch.Tensor, seen: dict[int, int] = seen) -> torch.Tensor:
            if t.data_ptr() not in params:
                seen[t.data_ptr()] = t.numel() * t.element_size()
            return t

        if device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
        start = time.perf_counter()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            gpu_peaks.append(torch.cuda.max_memory_allocated(device) - base)
        if step:  # the first step warms up
            times.append(time.perf_counter() - start)
        saved = sum(seen.values())
    return {
        "saved_activation_bytes": saved,
        "step_ms": statistics.median(times) * 1e3,
        "gpu_peak_bytes_above_baseline": max(gpu_peaks) if gpu_peaks else None,
    }


def run(p: CheckpointingParams, ctx: DemoContext) -> dict[str, Any]:
    """The same model trained with and without checkpointing each block: memory saved vs time spent."""
    device = ctx.device()
    torch.manual_seed(0)
    model = _Stack(p).to(device)
    plain = _measure(model, p, device)
    ctx.progress("without checkpointing measured", 0.5)
    model.checkpointed = True
    ckpt = _measure(model, p, device)
    ctx.progress("with checkpointing measured", 1.0)
    mib = 1024 * 1024
    memory_key = "gpu_peak_bytes_above_baseline" if device.type == "cuda" else "saved_activation_bytes"
    chart = bar_chart(
        f"Activation checkpointing, {p.layers} blocks ({device.type})",
        ["memory (MiB)", "step time (ms)"],
        {
            "no checkpointing": [plain[memory_key] / mib, plain["step_ms"]],
            "checkpointing": [ckpt[memory_key] / mib, ckpt["step_ms"]],
        },
        "MiB / ms",
    )
    return {
        "figures": {
            "without": plain,
            "with": ckpt,
            "memory_ratio": ckpt["saved_activation_bytes"] / plain["saved_activation_bytes"],
            "time_ratio": ckpt["step_ms"] / plain["step_ms"],
            "memory_method": "allocator peak (CUDA) and saved-tensor bytes"
            if device.type == "cuda"
            else "saved-tensor bytes (saved_tensors_hooks); torch has no CPU allocator statistics",
        },
        "series": [
            {"name": key, "x": ["without", "with"], "y": [plain[key], ckpt[key]]}
            for key in ("saved_activation_bytes", "step_ms")
        ],
        "charts": [{"title": "memory and step time", "svg": chart}],
        "notes": [
            "Each block keeps 3 activations for backward without checkpointing and only its input with it; "
            "backward recomputes the block's forward, so a step costs roughly one extra forward.",
            "Step times are wall-clock medians and vary with other load on the host.",
        ],
    }
