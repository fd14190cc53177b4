"""ZeRO: optimizer-state (and parameter, gradient) memory per rank, plain data parallel vs sharded, measured.

Bytes are counted from the tensors each rank actually holds after one Adam step (a DTensor counts its local
shard), beside the ZeRO paper's formulas for Ψ parameters and N ranks.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel

from worker.charts import bar_chart
from worker.child import DemoContext
from worker.params import ZeroParams
from worker.ranks import RankEnv


def local_bytes(tensors: list[Any]) -> int:
    """Bytes of the given tensors held by this rank (a DTensor counts only its local shard)."""
    total = 0
    for t in tensors:
        if t is None or not torch.is_tensor(t):
            continue
        local = t.to_local() if hasattr(t, "to_local") else t
        total += local.numel() * local.element_size()
    return total


def state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of an optimizer's state tensors (Adam: exp_avg, exp_avg_sq, step) on this rank."""
    return local_bytes([v for state in optimizer.state.values() for v in state.values()])


def _model(p: ZeroParams, device: torch.device) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(*[nn.Linear(p.hidden, p.hidden) for _ in range(p.layers)]).to(device)


def _train_step(model: nn.Module, optimizer: torch.optim.Optimizer, p: ZeroParams, env: RankEnv) -> None:
    x = torch.randn(8, p.hidden, device=env.device)
    model(x).pow(2).mean().backward()
    optimizer.step()


def _measure(model: nn.Module, optimizer: torch.optim.Optimizer, inner: torch.optim.Optimizer) -> dict[str, int]:
    params = list(model.parameters())
    return {
        "param_bytes": local_bytes(params),
        "grad_bytes": local_bytes([q.grad for q in params]),
        "optimizer_state_bytes": state_bytes(inner),
    }


def _fsdp(p: ZeroParams, env: RankEnv) -> dict[str, int] | str:
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError as exc:
        return f"FSDP (fully_shard) is not available in this torch: {exc}"
    model = _model(p, env.device)
    for layer in model:
        fully_shard(layer)
    fully_shard(model)
    adam = torch.optim.Adam(model.parameters())
    _train_step(model, adam, p, env)
    return _measure(model, adam, adam)


def _zero_rank(env: RankEnv, params: dict[str, Any]) -> dict[str, Any]:
    p = ZeroParams.model_validate(params)
    ids = [env.device.index] if env.device.type == "cuda" else None
    plain = DistributedDataParallel(_model(p, env.device), device_ids=ids)
    adam = torch.optim.Adam(plain.parameters())
    _train_step(plain, adam, p, env)
    out: dict[str, Any] = {"numel": sum(q.numel() for q in plain.parameters()), "plain": _measure(plain, adam, adam)}
    env.progress("plain data parallel measured", 0.33)
    sharded = DistributedDataParallel(_model(p, env.device), device_ids=ids)
    zero = ZeroRedundancyOptimizer(sharded.parameters(), optimizer_class=torch.optim.Adam)
    _train_step(sharded, zero, p, env)
    out["zero1"] = _measure(sharded, zero, zero.optim)
    env.progress("ZeroRedundancyOptimizer measured", 0.66)
    out["fsdp"] = _fsdp(p, env) if p.fsdp else "not requested"
    dist.barrier()
    return out


def zero_formulas(psi: int, n: int) -> dict[str, float]:
    """Per-rank model-state bytes for mixed-precision Adam (Rajbhandari et al.): baseline and stages 1-3."""
    return {
        "baseline_16psi": 16 * psi,
        "stage1_4psi_plus_12psi_over_n": 4 * psi + 12 * psi / n,
        "stage2_2psi_plus_14psi_over_n": 2 * psi + 14 * psi / n,
        "stage3_16psi_over_n": 16 * psi / n,
    }


def run(p: ZeroParams, ctx: DemoContext) -> dict[str, Any]:
    """Measure each rank's optimizer state for plain DP, ZeroRedundancyOptimizer and FSDP; compare with 1/N."""
    per_rank = ctx.run_ranks(_zero_rank, p.model_dump())
    psi, n = per_rank[0]["numel"], ctx.world_size
    modes = {"plain": "plain DP", "zero1": "ZeRO-1 (ZeroRedundancyOptimizer)", "fsdp": "FSDP (ZeRO-3)"}
    measured = {k: [r[k] for r in per_rank] for k in modes if isinstance(per_rank[0][k], dict)}
    plain_state = measured["plain"][0]["optimizer_state_bytes"]
    ratios = {k: max(r["optimizer_state_bytes"] for r in v) / plain_state for k, v in measured.items() if k != "plain"}
    mib = 1024 * 1024
    chart = bar_chart(
        f"Model states per rank (rank 0), Ψ={psi:,}, N={n}",
        [modes[k].split(" (")[0] for k in measured],
        {
            part: [v[0][f"{part}_bytes"] / mib for v in measured.values()]
            for part in ("param", "grad", "optimizer_state")
        },
        "MiB",
    )
    return {
        "figures": {
            "parameters_psi": psi,
            "world_size": n,
            "per_rank": measured,
            "optimizer_state_ratio_vs_plain": ratios,
            "ideal_ratio": 1 / n,
            "fsdp": per_rank[0]["fsdp"] if isinstance(per_rank[0]["fsdp"], str) else "measured",
            "fp32_adam_state_bytes": {"plain_8psi": 8 * psi, "sharded_8psi_over_n": 8 * psi / n},
            "zero_formulas_mixed_precision_bytes": zero_formulas(psi, n),
        },
        "series": [
            {"name": f"{k}_optimizer_state_bytes", "x": list(range(n)), "y": [r["optimizer_state_bytes"] for r in v]}
            for k, v in measured.items()
        ],
        "charts": [{"title": "model-state memory per rank", "svg": chart}],
        "notes": [
            "Measured: bytes of the tensors each rank holds after one step (fp32 Adam: exp_avg and exp_avg_sq are "
            "8Ψ bytes, plus a 4-byte step per parameter tensor).",
            "The ZeRO formulas assume mixed-precision Adam (fp16 weights and grads, fp32 master copy and moments: "
            "K = 12); this demo trains in fp32, so its optimizer state is 8Ψ unsharded and 8Ψ/N sharded.",
            "ZeroRedundancyOptimizer shards whole parameters, so the split is only as even as the parameter sizes.",
        ],
    }
