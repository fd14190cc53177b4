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


def demos_for(topics: list[str]) -> list[dict[str, Any]]:
    """The demos related to any of the topics (names the clients can offer to run)."""
    return [
        {"name": name, "title": title} for name, (title, demo_topics) in DEMOS.items() if set(demo_topics) & set(topics)
    ]
