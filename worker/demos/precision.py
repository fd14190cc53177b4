"""Mixed precision: how fp16 and bf16 round tiny and huge values, and the same training run in fp32, fp16
without loss scaling (small gradients underflow to zero), fp16 with a GradScaler, and bf16 (autocast).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from worker.charts import Series, line_chart
from worker.child import DemoContext
from worker.params import MixedPrecisionParams

PROBES = [1e-8, 6e-8, 1e-5, 1.0, 65504.0, 7e4, 1e6, 3e38]
MODES = ("fp32", "fp16", "fp16+GradScaler", "bf16")


def _as_json(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def rounding_table() -> list[dict[str, Any]]:
    """Each probe value as stored in fp32, fp16 and bf16 (0 = underflow, inf = overflow)."""
    rows = []
    for v in PROBES:
        t = torch.tensor(v, dtype=torch.float32)
        rows.append(
            {
                "value": v,
                "fp32": _as_json(float(t)),
                "fp16": _as_json(float(t.half())),
                "bf16": _as_json(float(t.bfloat16())),
            }
        )
    return rows


def overflow_check(device: torch.device) -> dict[str, Any]:
    """A dot product of 256 values of 300 (= 2.3e7) under autocast: inf in fp16, finite in bf16."""
    x = torch.full((1, 256), 300.0, device=device)
    out = {}
    for label, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        with torch.autocast(device.type, dtype=dtype):
            out[label] = _as_json(float((x @ x.T).float().item()))
    out["fp32"] = float((x @ x.T).item())
    return out


def _scaler(device: torch.device) -> Any:
    try:
        return torch.amp.GradScaler(device.type)
    except (RuntimeError, AttributeError, TypeError) as exc:
        return f"GradScaler is not supported on {device.type} in this torch: {exc}"


def _train(mode: str, p: MixedPrecisionParams, device: torch.device) -> dict[str, Any]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(p.hidden, p.hidden), nn.ReLU(), nn.Linear(p.hidden, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, y = torch.randn(64, p.hidden, device=device), torch.randn(64, 1, device=device)
    dtype = {"fp16": torch.float16, "fp16+GradScaler": torch.float16, "bf16": torch.bfloat16}.get(mode)
    scaler = _scaler(device) if mode == "fp16+GradScaler" else None
    if isinstance(scaler, str):
        return {"mode": mode, "unsupported": scaler}
    losses, zero_fractions, scales = [], [], []
    for _ in range(p.steps):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            mse = nn.functional.mse_loss(model(x).float(), y)
        loss = mse * p.gradient_scale  # a tiny loss scale, so gradients are tiny
        (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.unscale_(optimizer)
        grads = torch.cat([q.grad.flatten() for q in model.parameters() if q.grad is not None])
        zero_fractions.append(float((grads == 0).float().mean()))
        if scaler:
            scaler.step(optimizer)
            scaler.update()
            scales.append(float(scaler.get_scale()))
        else:
            optimizer.step()
        losses.append(float(mse))
    return {"mode": mode, "loss": losses, "zero_grad_fraction": zero_fractions, "grad_scale": scales or None}


def run(p: MixedPrecisionParams, ctx: DemoContext) -> dict[str, Any]:
    """Rounding table, an fp16 overflow, and four training runs whose gradients are pushed tiny."""
    device = ctx.device()
    runs = []
    for k, mode in enumerate(MODES):
        runs.append(_train(mode, p, device))
        ctx.progress(f"{mode} trained", (k + 1) / len(MODES))
    trained = [r for r in runs if "loss" in r]
    steps = [float(s) for s in range(p.steps)]
    chart = line_chart(
        f"Training loss with gradients × {p.gradient_scale:g} ({device.type})",
        [Series(r["mode"], steps, r["loss"], dashed=r["mode"] == "fp32") for r in trained],
        "step",
        "loss (MSE)",
        log_y=True,
    )
    summary = {
        r["mode"]: {
            "first_loss": r["loss"][0],
            "final_loss": r["loss"][-1],
            "mean_zero_grad_fraction": sum(r["zero_grad_fraction"]) / len(r["zero_grad_fraction"]),
        }
        for r in trained
    }
    return {
        "figures": {
            "device": str(device),
            "rounding": rounding_table(),
            "overflow_dot_product": overflow_check(device),
            "summary": summary,
            "unsupported": {r["mode"]: r["unsupported"] for r in runs if "unsupported" in r},
            "runs": runs,
        },
        "series": [{"name": f"{r['mode']}_loss", "x": steps, "y": r["loss"]} for r in trained],
        "charts": [{"title": "loss per step", "svg": chart}],
        "notes": [
            "fp16's smallest subnormal is about 6e-8 and its largest value 65504; bf16 keeps fp32's exponent range "
            "with fewer mantissa bits, so it neither underflows nor overflows here.",
            "Without loss scaling most fp16 gradients flush to zero and the loss stops falling; the GradScaler "
            "multiplies the loss before backward and divides the gradients before the step.",
        ],
    }
