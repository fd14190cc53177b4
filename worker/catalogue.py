"""The demo catalogue: names, titles and topics (shared with the API's related-demos links), parameters, runners."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contracts.demo_params import MULTI_RANK, world_size
from contracts.demos import DEMOS, SUMMARIES
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
        return world_size(self.name, values)

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
        SUMMARIES["allreduce"],
        p.AllreduceParams,
        "worker.demos.comms:allreduce",
        True,
    ),
    Demo(
        "collectives",
        SUMMARIES["collectives"],
        p.CollectivesParams,
        "worker.demos.comms:collectives",
        True,
    ),
    Demo(
        "pipeline",
        SUMMARIES["pipeline"],
        p.PipelineParams,
        "worker.demos.pipeline:run",
        True,
    ),
    Demo(
        "zero",
        SUMMARIES["zero"],
        p.ZeroParams,
        "worker.demos.zero:run",
        True,
    ),
    Demo(
        "mixed_precision",
        SUMMARIES["mixed_precision"],
        p.MixedPrecisionParams,
        "worker.demos.precision:run",
        False,
    ),
    Demo(
        "checkpointing",
        SUMMARIES["checkpointing"],
        p.CheckpointingParams,
        "worker.demos.checkpointing:run",
        False,
    ),
    Demo(
        "sampler",
        SUMMARIES["sampler"],
        p.SamplerParams,
        "worker.demos.sampler:run",
        True,
    ),
    Demo(
        "matmul",
        SUMMARIES["matmul"],
        p.MatmulParams,
        "worker.demos.matmul:run",
        False,
    ),
]
CATALOGUE: dict[str, Demo] = {demo.name: demo for demo in _ENTRIES}
assert set(CATALOGUE) == set(DEMOS), "the worker's catalogue and contracts.demos must name the same demos"
assert {d.name for d in _ENTRIES if d.multi_rank} == MULTI_RANK
