"""DistributedSampler: which dataset indices each rank gets, epoch by epoch, with and without set_epoch."""

from __future__ import annotations

from typing import Any, cast

import torch.distributed as dist
from torch.utils.data import Dataset, DistributedSampler

from worker.charts import Series, line_chart
from worker.child import DemoContext
from worker.params import SamplerParams
from worker.ranks import RankEnv


def _sampler_rank(env: RankEnv, params: dict[str, Any]) -> dict[str, list[list[int]]]:
    p = SamplerParams.model_validate(params)
    out: dict[str, list[list[int]]] = {}
    for mode in ("with_set_epoch", "without_set_epoch"):
        # each rank builds its own sampler, exactly as a training script would
        dataset = cast(Dataset[int], range(p.dataset_size))  # the sampler only needs len()
        sampler: DistributedSampler[int] = DistributedSampler(
            dataset, num_replicas=env.world_size, rank=env.rank, shuffle=p.shuffle, seed=p.seed
        )
        epochs = []
        for epoch in range(p.epochs):
            if mode == "with_set_epoch":
                sampler.set_epoch(epoch)
            epochs.append(list(sampler))
        out[mode] = epochs
    dist.barrier()
    env.progress("indices collected", 1.0)
    return out


def _checks(per_rank: list[dict[str, list[list[int]]]], p: SamplerParams) -> dict[str, Any]:
    def order(mode: str, epoch: int) -> list[int]:
        return [i for r in per_rank for i in r[mode][epoch]]

    def same_every_epoch(mode: str) -> bool:
        return all(order(mode, e) == order(mode, 0) for e in range(p.epochs))

    covered = all(set(order(m, e)) == set(range(p.dataset_size)) for m in per_rank[0] for e in range(p.epochs))
    per_rank_len = len(per_rank[0]["with_set_epoch"][0])
    return {
        "every_epoch_covers_dataset": covered,
        "same_order_every_epoch_without_set_epoch": same_every_epoch("without_set_epoch"),
        "same_order_every_epoch_with_set_epoch": same_every_epoch("with_set_epoch"),
        "indices_per_rank": per_rank_len,
        "padded_duplicates": per_rank_len * len(per_rank) - p.dataset_size,
    }


def run(p: SamplerParams, ctx: DemoContext) -> dict[str, Any]:
    """Each rank's indices per epoch in both modes, and what changes (or not) between epochs."""
    per_rank = ctx.run_ranks(_sampler_rank, p.model_dump())
    checks = _checks(per_rank, p)
    rank0 = per_rank[0]
    positions = [float(i) for i in range(checks["indices_per_rank"])]
    series = [
        Series(f"epoch {e}, set_epoch", positions, [float(i) for i in rank0["with_set_epoch"][e]])
        for e in range(p.epochs)
    ] + [
        Series(f"epoch {e}, no set_epoch", positions, [float(i) for i in rank0["without_set_epoch"][e]], dashed=True)
        for e in range(p.epochs)
    ]
    chart = line_chart("Rank 0's indices per epoch", series, "position in rank 0's shard", "dataset index")
    return {
        "figures": {
            "world_size": ctx.world_size,
            **checks,
            "indices": {
                mode: [{"rank": r, "epochs": per_rank[r][mode]} for r in range(ctx.world_size)]
                for mode in ("with_set_epoch", "without_set_epoch")
            },
        },
        "series": [{"name": s.name, "x": s.x, "y": s.y} for s in series],
        "charts": [{"title": "rank 0's indices per epoch", "svg": chart}],
        "notes": [
            "Without set_epoch the shuffle seed never changes, so every epoch repeats the same order.",
            "When the dataset does not divide by the world size, DistributedSampler pads by repeating indices "
            "(drop_last=False).",
        ],
    }
