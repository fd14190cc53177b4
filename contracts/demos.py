"""Which live demos illustrate which topics (the demos themselves run on the worker)."""

from __future__ import annotations

from typing import Any

# name -> (title, topics it illustrates)
DEMOS: dict[str, tuple[str, tuple[str, ...]]] = {
    "allreduce": ("All-reduce bandwidth sweep", ("collectives", "interconnect")),
    "collectives": (
        "What each collective does to every rank's data",
        ("collectives", "zero-fsdp", "expert-parallelism"),
    ),
    "pipeline": ("Pipeline bubbles: GPipe vs 1F1B", ("pipeline-parallelism",)),
    "zero": ("ZeRO / FSDP optimizer-state memory per rank", ("zero-fsdp",)),
    "mixed_precision": ("fp16 overflow vs bf16, and loss scaling", ("mixed-precision",)),
    "checkpointing": ("Activation checkpointing: memory vs time", ("memory",)),
    "sampler": ("DistributedSampler indices per rank", ("data-parallelism",)),
    "matmul": ("Matmul throughput against peak (MFU)", ("scaling",)),
}


# name -> what the demo shows (the worker runs it; the API lists it)
SUMMARIES: dict[str, str] = {
    "allreduce": (
        "All-reduce sweep over message sizes; algorithm and bus bandwidth computed as nccl-tests does "
        "(busbw = algbw × 2(n-1)/n), against the interconnect's peak where known."
    ),
    "collectives": (
        "Broadcast, all-gather, reduce-scatter, all-to-all and all-reduce on small labelled tensors: "
        "every rank's data before and after."
    ),
    "pipeline": (
        "One model split into stages, run with GPipe and 1F1B for several micro-batch counts: measured idle "
        "(bubble) fraction and peak activation memory beside (p-1)/(m+p-1)."
    ),
    "zero": (
        "Optimizer-state memory per rank: plain data parallelism vs ZeroRedundancyOptimizer and FSDP, "
        "measured, beside the ZeRO stage 1/2/3 formulas."
    ),
    "mixed_precision": (
        "The same small training run in fp32, fp16 without loss scaling (gradients underflow), fp16 with a "
        "GradScaler, and bf16; plus how each format rounds tiny and huge values."
    ),
    "checkpointing": (
        "Activation memory and step time of an MLP stack with and without activation checkpointing."
    ),
    "sampler": (
        "Which indices DistributedSampler gives each rank, epoch by epoch, with and without set_epoch."
    ),
    "matmul": (
        "Achieved matrix-multiply throughput against the device's peak (an MFU-style figure)."
    ),
}


def demos_for(topics: list[str]) -> list[dict[str, Any]]:
    """The demos related to any of the topics (names the clients can offer to run)."""
    return [
        {"name": name, "title": title} for name, (title, demo_topics) in DEMOS.items() if set(demo_topics) & set(topics)
    ]
