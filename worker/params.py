"""Each demo's parameters: defined in contracts.demo_params, which the API validates with too."""

from contracts.demo_params import (
    AllreduceParams,
    CheckpointingParams,
    CollectivesParams,
    DemoParams,
    MatmulParams,
    MixedPrecisionParams,
    PipelineParams,
    SamplerParams,
    ZeroParams,
)

__all__ = [
    "AllreduceParams",
    "CheckpointingParams",
    "CollectivesParams",
    "DemoParams",
    "MatmulParams",
    "MixedPrecisionParams",
    "PipelineParams",
    "SamplerParams",
    "ZeroParams",
]
