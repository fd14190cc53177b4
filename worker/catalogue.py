"""The demo catalogue: names, titles and topics (shared with the API's related-demos links), parameters, runners."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.demos import DEMOS
from worker import params as p


@dataclass(frozen=True)
class Demo:
    """One live demo: what it shows, its parameters, and the function (module:name) that runs it."""

    name: str
    summary: str
    params: type[p.DemoParams]
    runner: str
    multi_rank: bool

    @property
    def title(self) -> str:
        """The title shared with the API's catalogue."""
        return DEMOS[self.name][0]

    @property
    def topics(self) -> list[str]:
        """The bank topics this demo illustrates."""
        return list(DEMOS[self.name][1])

    def world_size(self, values: p.DemoParams) -> int:
        """How many ranks a run with these parameters starts (1 for single-device demos)."""
        if not self.multi_rank:
            return 1
        for attr in ("world_size", "stages"):
            if hasattr(values, attr):
                return int(getattr(values, attr))
        return 2

    def describe(self) -> dict[str, Any]:
        """The catalogue entry clients see, with the parameters' JSON schema."""
        return {
            "name": self.name,
            "title": self.title,
            "topics": self.topics,
            "summary": self.summary,
            "multi_rank": self.multi_rank,
            "params": self.params.model_json_schema(),
        }


_ENTRIES = [
    Demo(
        "allreduce",
        "All-reduce sweep over message sizes; algorithm and bus bandwidth computed as nccl-tests does "
        "(busbw = algbw × 2(n-1)/n), against the interconnect's peak where known.",
        p.AllreduceParams,
        "worker.demos.comms:allreduce",
        True,
    ),
    Demo(
        "collectives",
        "Broadcast, all-gather, reduce-scatter, all-to-all and all-reduce on small labelled tensors: "
        "every rank's data before and after.",
        p.CollectivesParams,
        "worker.demos.comms:collectives",
        True,
    ),
    Demo(
        "pipeline",
        "One model split into stages, run with GPipe and 1F1B for several micro-batch counts: measured idle "
        "(bubble) fraction and peak activation memory beside (p-1)/(m+p-1).",
        p.PipelineParams,
        "worker.demos.pipeline:run",
        True,
    ),
    Demo(
        "zero",
        "Optimizer-state memory per rank: plain data parallelism vs ZeroRedundancyOptimizer and FSDP, "
        "measured, beside the ZeRO stage 1/2/3 formulas.",
        p.ZeroParams,
        "worker.demos.zero:run",
        True,
    ),
    Demo(
        "mixed_precision",
        "The same small training run in fp32, fp16 without loss scaling (gradients underflow), fp16 with a "
        "GradScaler, and bf16; plus how each format rounds tiny and huge values.",
        p.MixedPrecisionParams,
        "worker.demos.precision:run",
        False,
    ),
    Demo(
        "checkpointing",
        "Activation memory and step time of an MLP stack with and without activation checkpointing.",
        p.CheckpointingParams,
        "worker.demos.checkpointing:run",
        False,
    ),
    Demo(
        "sampler",
        "Which indices DistributedSampler gives each rank, epoch by epoch, with and without set_epoch.",
        p.SamplerParams,
        "worker.demos.sampler:run",
        True,
    ),
    Demo(
        "matmul",
        "Achieved matrix-multiply throughput against the device's peak (an MFU-style figure).",
        p.MatmulParams,
        "worker.demos.matmul:run",
        False,
    ),
]
CATALOGUE: dict[str, Demo] = {demo.name: demo for demo in _ENTRIES}
assert set(CATALOGUE) == set(DEMOS), "the worker's catalogue and contracts.demos must name the same demos"
