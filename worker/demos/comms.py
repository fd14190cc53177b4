"""Communication demos: the all-reduce bandwidth sweep and what each collective does to every rank's data."""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist

from worker.charts import Series, bar_chart, line_chart
from worker.child import DemoContext
from worker.devices import LINK_PEAK_GBPS, lookup
from worker.params import AllreduceParams, CollectivesParams
from worker.ranks import RankEnv


def message_sizes(p: AllreduceParams) -> list[int]:
    """The swept message sizes in bytes (multiples of 4: float32 elements)."""
    sizes, size = [], p.min_bytes
    while size <= p.max_bytes:
        sizes.append(max(4, size // 4 * 4))
        size *= p.factor
    return sizes


def bus_factor(world: int) -> float:
    """nccl-tests' all-reduce bus-bandwidth factor 2(n-1)/n."""
    return 2 * (world - 1) / world


def _allreduce_rank(env: RankEnv, params: dict[str, Any]) -> list[tuple[int, float]]:
    p = AllreduceParams.model_validate(params)
    check = torch.full((4,), float(env.rank + 1), device=env.device)
    dist.all_reduce(check)
    expected = env.world_size * (env.world_size + 1) / 2
    if not torch.all(check == expected):
        raise RuntimeError(f"all-reduce gave {check.tolist()}, expected {expected}")
    sizes = message_sizes(p)
    timings = []
    for i, size in enumerate(sizes):
        buf = torch.zeros(size // 4, dtype=torch.float32, device=env.device)
        for _ in range(p.warmup):
            dist.all_reduce(buf)
        env.sync()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(p.iterations):
            dist.all_reduce(buf)
        env.sync()
        # like nccl-tests, the slowest rank's time counts
        elapsed = torch.tensor([(time.perf_counter() - start) / p.iterations], device=env.device)
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        timings.append((size, float(elapsed.item())))
        env.progress(f"{size} bytes: {elapsed.item() * 1e6:.0f} µs", (i + 1) / len(sizes))
    return timings


def allreduce(p: AllreduceParams, ctx: DemoContext) -> dict[str, Any]:
    """All-reduce sweep: time per size, algbw = bytes/time, busbw = algbw × 2(n-1)/n."""
    ctx.progress(f"starting {ctx.world_size} ranks ({ctx.backend})")
    timings = ctx.run_ranks(_allreduce_rank, p.model_dump())[0]
    factor = bus_factor(ctx.world_size)
    rows = [
        {
            "bytes": size,
            "time_us": round(t * 1e6, 2),
            "algbw_GBps": size / t / 1e9,
            "busbw_GBps": size / t / 1e9 * factor,
        }
        for size, t in timings
    ]
    names = ctx.device_names()
    peak = lookup(LINK_PEAK_GBPS, names[0]) if ctx.kind == "cuda" else None
    best = max(r["busbw_GBps"] for r in rows)
    x = [float(r["bytes"]) for r in rows]
    chart = line_chart(
        f"All-reduce bandwidth, {ctx.world_size} ranks ({ctx.backend})",
        [
            Series("bus bandwidth", x, [r["busbw_GBps"] for r in rows]),
            Series("algorithm bandwidth", x, [r["algbw_GBps"] for r in rows], dashed=True),
        ],
        "message size (bytes)",
        "GB/s",
        log_x=True,
    )
    return {
        "figures": {
            "world_size": ctx.world_size,
            "bus_factor": factor,
            "peak_busbw_GBps": best,
            "link_peak_GBps": peak,
            "fraction_of_link_peak": best / peak if peak else None,
            "rows": rows,
        },
        "series": [
            {"name": "busbw_GBps", "x": x, "y": [r["busbw_GBps"] for r in rows]},
            {"name": "algbw_GBps", "x": x, "y": [r["algbw_GBps"] for r in rows]},
        ],
        "charts": [{"title": "all-reduce bandwidth vs message size", "svg": chart}],
        "notes": [
            "algbw = bytes / time of the slowest rank; busbw = algbw × 2(n-1)/n, as nccl-tests reports.",
            "Small messages are latency-bound, so bandwidth grows with message size until the link saturates.",
            *(["gloo on CPU processes of one host: no interconnect peak to compare with."] if peak is None else []),
        ],
    }


# newer torch renames these; use the new names where they exist
_all_gather = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
_reduce_scatter = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)


def _label(t: torch.Tensor) -> list[int]:
    return [int(v) for v in t.tolist()]


def _collectives_rank(env: RankEnv, params: dict[str, Any]) -> dict[str, dict[str, list[int]]]:
    p = CollectivesParams.model_validate(params)
    n = env.world_size * p.chunk

    def mine() -> torch.Tensor:
        # rank r holds r*100 + 0..n-1, so every value says where it came from
        return (torch.arange(n, dtype=torch.float32) + 100 * env.rank).to(env.device)

    out: dict[str, dict[str, list[int]]] = {}
    t = mine()
    dist.broadcast(t, src=0)
    out["broadcast (from rank 0)"] = {"before": _label(mine()), "after": _label(t)}
    gathered = torch.empty(n * env.world_size, device=env.device)
    _all_gather(gathered, mine())
    out["all_gather"] = {"before": _label(mine()), "after": _label(gathered)}
    shard = torch.empty(p.chunk, device=env.device)
    _reduce_scatter(shard, mine())
    out["reduce_scatter (sum)"] = {"before": _label(mine()), "after": _label(shard)}
    swapped = torch.empty(n, device=env.device)
    dist.all_to_all_single(swapped, mine())
    out["all_to_all"] = {"before": _label(mine()), "after": _label(swapped)}
    t = mine()
    dist.all_reduce(t)
    out["all_reduce (sum)"] = {"before": _label(mine()), "after": _label(t)}
    env.progress("collectives done", 1.0)
    return out


def expected_after(op: str, rank: int, world: int, chunk: int) -> list[int]:
    """What a collective should leave on `rank` (the demo checks the real result against it)."""
    n = world * chunk

    def held(r: int) -> list[int]:
        return [100 * r + i for i in range(n)]

    if op.startswith("broadcast"):
        return held(0)
    if op == "all_gather":
        return [v for r in range(world) for v in held(r)]
    if op.startswith("reduce_scatter"):
        return [sum(held(r)[rank * chunk + i] for r in range(world)) for i in range(chunk)]
    if op == "all_to_all":
        return [v for r in range(world) for v in held(r)[rank * chunk : (rank + 1) * chunk]]
    return [sum(held(r)[i] for r in range(world)) for i in range(n)]


def collectives(p: CollectivesParams, ctx: DemoContext) -> dict[str, Any]:
    """Run each collective on labelled tensors; every rank's data before and after, checked."""
    per_rank = ctx.run_ranks(_collectives_rank, p.model_dump())
    ops = list(per_rank[0])
    table = [
        {
            "op": op,
            "ranks": [{"rank": r, **per_rank[r][op]} for r in range(ctx.world_size)],
            "correct": all(
                per_rank[r][op]["after"] == expected_after(op, r, ctx.world_size, p.chunk)
                for r in range(ctx.world_size)
            ),
        }
        for op in ops
    ]
    before = [float(len(per_rank[0][op]["before"])) for op in ops]
    after = [float(len(per_rank[0][op]["after"])) for op in ops]
    chart = bar_chart(
        "Elements held per rank, before and after",
        [op.split(" ")[0] for op in ops],
        {"before": before, "after": after},
        "elements per rank",
    )
    return {
        "figures": {"world_size": ctx.world_size, "all_correct": all(row["correct"] for row in table), "ops": table},
        "series": [
            {"name": "elements_before", "x": ops, "y": before},
            {"name": "elements_after", "x": ops, "y": after},
        ],
        "charts": [{"title": "elements per rank before and after each collective", "svg": chart}],
        "notes": ["Rank r starts with r*100 + 0..n-1, so each value shows which rank it came from."],
    }
