"""Technically accurate extra reference answers for seed questions whose accepted answer is loose."""

from __future__ import annotations

# Keyed by (seed file, question number). These are domain facts (see RESEARCH.md and the
# nccl-tests / ZeRO / Megatron papers), used as additional reference answers so a student who
# states the accurate fact is not marked wrong because the seed's wording is imprecise.
CAVEATS: dict[tuple[str, int], list[str]] = {
    ("003_28df717c268ee6dd.txt", 4): [
        "Pipeline parallelism splits the layers into stages on different GPUs and feeds micro-batches "
        "through them; plain 1F1B alternates one forward and one backward per stage so at most p "
        "micro-batches are in flight, bounding activation memory, while the interleaved 1F1B schedule "
        "with virtual stages shrinks the bubble",
    ],
    ("002_1f1c560eb3b82a3f.txt", 4): [
        "Ring all-reduce passes chunks around a ring so each GPU sends and receives about 2(N-1)/N of "
        "the data, roughly constant as GPUs are added, using every link's bandwidth",
    ],
    ("003_28df717c268ee6dd.txt", 18): [
        "In ring all-reduce each GPU sends about 2(N-1)/N times the tensor size, nearly independent of "
        "N, which matches the lower bound, so it is bandwidth-optimal",
    ],
    ("000_78b4b506bc754b1f.txt", 3): [
        "DistributedDataParallel (DDP), data parallelism that copies the whole model to each GPU so no "
        "layer partitioning is needed",
    ],
    ("001_d277a1055194c29d.txt", 5): [
        "NCCL's own InfiniBand verbs (IB verbs) transport provides RDMA by default; UCX is an optional "
        "plugin",
    ],
    ("002_1f1c560eb3b82a3f.txt", 5): [
        "With ZeRO or FSDP the FP32 master weights are sharded across the GPUs rather than fully "
        "copied on each one",
    ],
}


def extra_references(file: str, number: int) -> list[str]:
    """The accurate extra reference answers for a seed question, if any."""
    return list(CAVEATS.get((file, number), []))
