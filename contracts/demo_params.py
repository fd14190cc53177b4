"""Each demo's parameters, validated and bounded (a bad value is a 422 before anything runs), how many ranks a
run starts, and what it costs.

The API validates a request with these models before it queues a job; the worker validates the job again.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

WorldSize = Annotated[int, Field(ge=2, le=8, description="number of ranks (processes)")]
KiB, MiB = 1024, 1024 * 1024


class DemoParams(BaseModel):
    """Common to every demo: a time limit, after which the run and all its processes are ended."""

    model_config = ConfigDict(extra="forbid")

    time_limit_s: int = Field(120, ge=5, le=600, description="the run is ended and failed after this")


class AllreduceParams(DemoParams):
    """All-reduce sweep: message sizes from min_bytes to max_bytes, multiplied by factor each step."""

    world_size: WorldSize = 2
    min_bytes: int = Field(4 * KiB, ge=4, le=256 * MiB)
    max_bytes: int = Field(4 * MiB, ge=4, le=256 * MiB)
    factor: int = Field(4, ge=2, le=16)
    iterations: int = Field(10, ge=1, le=200)
    warmup: int = Field(2, ge=0, le=20)

    @model_validator(mode="after")
    def _sizes(self) -> AllreduceParams:
        if self.min_bytes > self.max_bytes:
            raise ValueError("min_bytes must not exceed max_bytes")
        count, size = 1, self.min_bytes
        while size * self.factor <= self.max_bytes:
            size, count = size * self.factor, count + 1
        if count > 16:
            raise ValueError("at most 16 message sizes: raise factor or narrow the range")
        return self


class CollectivesParams(DemoParams):
    """Collectives on small labelled tensors: each rank holds world_size × chunk elements."""

    world_size: WorldSize = 2
    chunk: int = Field(2, ge=1, le=4)


class PipelineParams(DemoParams):
    """One model split into `stages` ranks, run with GPipe and 1F1B for each micro-batch count."""

    stages: WorldSize = 2
    micro_batches: list[Annotated[int, Field(ge=1, le=32)]] = Field(default=[1, 2, 4, 8], min_length=1, max_length=6)
    hidden: int = Field(512, ge=16, le=4096)
    layers_per_stage: int = Field(4, ge=1, le=8)
    micro_batch_size: int = Field(64, ge=1, le=512)
    steps: int = Field(3, ge=1, le=10)


class ZeroParams(DemoParams):
    """Adam optimizer state per rank: plain DDP-style vs ZeroRedundancyOptimizer vs FSDP."""

    world_size: WorldSize = 2
    layers: int = Field(8, ge=2, le=32)
    hidden: int = Field(256, ge=16, le=2048)
    fsdp: bool = True


class MixedPrecisionParams(DemoParams):
    """fp32, fp16 without and with loss scaling, and bf16 on the same tiny training run."""

    steps: int = Field(20, ge=2, le=200)
    hidden: int = Field(64, ge=8, le=1024)
    gradient_scale: float = Field(1e-6, gt=0, le=1.0, description="multiplies the loss, to push gradients small")


class CheckpointingParams(DemoParams):
    """A stack of MLP blocks trained with and without activation checkpointing."""

    layers: int = Field(12, ge=2, le=48)
    hidden: int = Field(512, ge=16, le=4096)
    batch: int = Field(256, ge=1, le=4096)
    steps: int = Field(3, ge=1, le=20)

    @model_validator(mode="after")
    def _size(self) -> CheckpointingParams:
        if self.layers * self.batch * self.hidden > 2**27:
            raise ValueError("layers × batch × hidden must be at most 2**27 (activation memory is bounded)")
        return self


class SamplerParams(DemoParams):
    """DistributedSampler indices per rank over several epochs, with and without set_epoch."""

    world_size: WorldSize = 2
    dataset_size: int = Field(12, ge=1, le=256)
    epochs: int = Field(3, ge=1, le=5)
    seed: int = Field(0, ge=0, le=2**31 - 1)
    shuffle: bool = True


class MatmulParams(DemoParams):
    """Square matmuls of each size; achieved TFLOPS against the device's peak."""

    sizes: list[Annotated[int, Field(ge=64, le=16384)]] = Field(
        default=[256, 512, 1024, 2048], min_length=1, max_length=8
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    iterations: int = Field(5, ge=1, le=50)


MULTI_RANK = {"allreduce", "collectives", "pipeline", "zero", "sampler"}
PARAMS: dict[str, type[DemoParams]] = {
    "allreduce": AllreduceParams,
    "collectives": CollectivesParams,
    "pipeline": PipelineParams,
    "zero": ZeroParams,
    "mixed_precision": MixedPrecisionParams,
    "checkpointing": CheckpointingParams,
    "sampler": SamplerParams,
    "matmul": MatmulParams,
}


def world_size(name: str, values: DemoParams) -> int:
    """How many ranks a run with these parameters starts (1 for single-device demos)."""
    if name not in MULTI_RANK:
        return 1
    for attr in ("world_size", "stages"):
        if hasattr(values, attr):
            return int(getattr(values, attr))
    return 2


def sweep(values: AllreduceParams) -> list[int]:
    """The all-reduce sweep's message sizes in bytes (multiples of 4: float32 elements)."""
    sizes, size = [], values.min_bytes
    while size <= values.max_bytes:
        sizes.append(max(4, size // 4 * 4))
        size *= values.factor
    return sizes


def cost(name: str, values: DemoParams) -> int:
    """What a run costs, in byte-iterations: bytes a rank works on × iterations × ranks.

    All-reduce: the swept message bytes × (iterations + warm-up) × ranks. The others estimate the bytes
    their tensors hold the same way; matmul counts its floating-point operations / 64 (its work grows
    as n³ while its bytes grow as n²). One budget (`TUTOR_DEMO_COST_BUDGET`) then bounds every demo.
    """
    ranks = world_size(name, values)
    if isinstance(values, AllreduceParams):
        return sum(sweep(values)) * (values.iterations + values.warmup) * ranks
    if isinstance(values, CollectivesParams):
        return 8 * 5 * ranks * ranks * values.chunk
    if isinstance(values, PipelineParams):
        weights = values.hidden * values.hidden * values.layers_per_stage
        activations = 3 * values.hidden * values.micro_batch_size * sum(values.micro_batches) * values.layers_per_stage
        return 4 * (weights + activations) * values.steps * 2 * ranks
    if isinstance(values, ZeroParams):
        return 4 * 16 * values.hidden * values.hidden * values.layers * 3 * ranks
    if isinstance(values, MixedPrecisionParams):
        return 4 * values.hidden * values.hidden * values.steps * 4
    if isinstance(values, CheckpointingParams):
        return 4 * 4 * values.layers * values.batch * values.hidden * values.steps
    if isinstance(values, SamplerParams):
        return 8 * values.dataset_size * values.epochs * ranks
    if isinstance(values, MatmulParams):
        return sum(2 * n**3 for n in values.sizes) * values.iterations // 64
    return 0
