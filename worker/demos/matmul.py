"""Matmul throughput: achieved TFLOPS of square matmuls against the device's published peak (MFU-style)."""

from __future__ import annotations

import time
from typing import Any

import torch

from worker.charts import Series, line_chart
from worker.child import DemoContext
from worker.devices import MATMUL_PEAK_TFLOPS, lookup
from worker.params import MatmulParams


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_matmul(n: int, dtype: torch.dtype, device: torch.device, iterations: int) -> float:
    """Seconds per n×n by n×n matmul (after a warm-up)."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    torch.matmul(a, b)
    _sync(device)
    start = time.perf_counter()
    for _ in range(iterations):
        torch.matmul(a, b)
    _sync(device)
    return (time.perf_counter() - start) / iterations


def run(p: MatmulParams, ctx: DemoContext) -> dict[str, Any]:
    """Achieved TFLOPS per size (2n³ / time) and, where the peak is known, the fraction of it."""
    device = ctx.device()
    name = ctx.device_names()[0]
    dtype_name = p.dtype if p.dtype != "auto" else ("bfloat16" if device.type == "cuda" else "float32")
    dtype = getattr(torch, dtype_name)
    peaks = lookup(MATMUL_PEAK_TFLOPS, name) if device.type == "cuda" else None
    peak = peaks.get(dtype_name) if peaks else None
    rows: list[dict[str, Any]] = []
    achieved: list[float] = []
    for k, n in enumerate(p.sizes):
        seconds = time_matmul(n, dtype, device, p.iterations)
        achieved.append(2 * n**3 / seconds / 1e12)
        fraction = achieved[-1] / peak if peak else None
        rows.append({"n": n, "ms": seconds * 1e3, "tflops": achieved[-1], "fraction_of_peak": fraction})
        ctx.progress(f"n={n}: {achieved[-1]:.3f} TFLOPS", (k + 1) / len(p.sizes))
    x = [float(n) for n in p.sizes]
    series = [Series("achieved", x, achieved)]
    if peak:
        series.append(Series(f"peak {peak:g}", x, [peak] * len(x), dashed=True))
    chart = line_chart(f"Matmul throughput, {dtype_name} on {name}", series, "n (n×n @ n×n)", "TFLOPS", log_x=True)
    best = max(achieved)
    return {
        "figures": {
            "device": name,
            "dtype": dtype_name,
            "best_tflops": best,
            "peak_tflops": peak,
            "best_fraction_of_peak": best / peak if peak else None,
            "rows": rows,
        },
        "series": [{"name": "tflops", "x": x, "y": achieved}],
        "charts": [{"title": "matmul TFLOPS vs size", "svg": chart}],
        "notes": [
            "TFLOPS = 2n³ / seconds per matmul. Peaks are dense datasheet figures (no sparsity) for known GPUs.",
            *([] if peak else [f"No published peak is known for {name} in {dtype_name}, so no MFU-style fraction."]),
        ],
    }
