"""Unit tests of the worker's pure parts: charts, parameters, schedules, formulas, placement."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from pydantic import ValidationError

from contracts.demos import DEMOS
from worker.catalogue import CATALOGUE
from worker.charts import Series, bar_chart, line_chart
from worker.child import plain
from worker.demos.comms import bus_factor, expected_after, message_sizes
from worker.demos.pipeline import replay, schedule, theory_bubble
from worker.demos.zero import zero_formulas
from worker.devices import DeviceInfo, all_slots, place
from worker.params import AllreduceParams, CheckpointingParams, PipelineParams


def test_line_chart_is_valid_svg_with_a_line_per_series() -> None:
    svg = line_chart(
        "t <&>",
        [Series("a", [1, 10, 100], [1, 2, 3]), Series("b", [1, 10, 100], [3, 2, float("inf")])],
        "x",
        "y",
        log_x=True,
    )
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    assert len(root.findall("{http://www.w3.org/2000/svg}polyline")) == 2
    assert "t &lt;&amp;&gt;" in svg


def test_bar_chart_has_a_bar_per_value() -> None:
    root = ET.fromstring(bar_chart("b", ["x", "y"], {"one": [1.0, 2.0], "two": [0.5, 0.0]}, "units"))
    bars = [
        r
        for r in root.findall("{http://www.w3.org/2000/svg}rect")
        if r.get("fill", "").startswith("#") and r.get("fill") != "#fff"
    ]
    assert len(bars) == 4


def test_catalogues_agree() -> None:
    assert (
        set(CATALOGUE)
        == set(DEMOS)
        == {
            "allreduce",
            "collectives",
            "pipeline",
            "zero",
            "mixed_precision",
            "checkpointing",
            "sampler",
            "matmul",
        }
    )
    for demo in CATALOGUE.values():
        assert demo.describe()["params"]["properties"]["time_limit_s"]["maximum"] == 600


@pytest.mark.parametrize(
    ("model", "values"),
    [
        (AllreduceParams, {"world_size": 9}),
        (AllreduceParams, {"world_size": 1}),
        (AllreduceParams, {"min_bytes": 1024, "max_bytes": 4}),
        (AllreduceParams, {"min_bytes": 4, "max_bytes": 256 * 1024 * 1024, "factor": 2}),
        (AllreduceParams, {"max_bytes": 2**40}),
        (AllreduceParams, {"surprise": 1}),
        (PipelineParams, {"micro_batches": [1, 64]}),
        (CheckpointingParams, {"layers": 48, "batch": 4096, "hidden": 4096}),
        (AllreduceParams, {"time_limit_s": 3600}),
    ],
)
def test_bad_params_are_refused(model: type, values: dict) -> None:
    with pytest.raises(ValidationError):
        model.model_validate(values)


def test_message_sizes_and_bus_factor() -> None:
    assert message_sizes(AllreduceParams(min_bytes=1024, max_bytes=16384, factor=4)) == [1024, 4096, 16384]
    assert bus_factor(2) == 1.0
    assert bus_factor(4) == 1.5
    assert bus_factor(8) == 1.75


def test_collective_expectations() -> None:
    assert expected_after("all_to_all", 1, 2, 2) == [2, 3, 102, 103]
    assert expected_after("reduce_scatter (sum)", 0, 2, 2) == [100, 102]


@pytest.mark.parametrize("kind", ["gpipe", "1f1b"])
@pytest.mark.parametrize(("stages", "m"), [(2, 1), (2, 4), (4, 8), (3, 5)])
def test_schedules_replay_to_theory_with_equal_costs(kind: str, stages: int, m: int) -> None:
    ops = [schedule(kind, s, stages, m) for s in range(stages)]
    assert all(sorted(o) == sorted([("F", i) for i in range(m)] + [("B", i) for i in range(m)]) for o in ops)
    idle = replay(stages, m, kind, [{"F": 1.0, "B": 2.0}] * stages)
    assert sum(idle) / stages == pytest.approx(theory_bubble(stages, m))


def test_1f1b_keeps_at_most_p_minus_stage_micro_batches_in_flight() -> None:
    for stage in range(4):
        live = peak = 0
        for op, _ in schedule("1f1b", stage, 4, 8):
            live += 1 if op == "F" else -1
            peak = max(peak, live)
        assert peak == 4 - stage


def test_zero_formulas() -> None:
    f = zero_formulas(1000, 4)
    assert f["baseline_16psi"] == 16000
    assert f["stage1_4psi_plus_12psi_over_n"] == 7000
    assert f["stage2_2psi_plus_14psi_over_n"] == 5500
    assert f["stage3_16psi_over_n"] == 4000


def test_placement() -> None:
    cpu = DeviceInfo("cpu")
    assert place(cpu, 2, {"cpu"}) is not None
    assert place(cpu, 2, set()) is None
    gpus = DeviceInfo("cuda", ["NVIDIA H100", "NVIDIA H100"])
    both = place(gpus, 2, all_slots(gpus))
    assert both is not None and both.kind == "cuda" and both.slots == ("cuda:0", "cuda:1")
    assert place(gpus, 2, {"cuda:1", "cpu"}) is None  # waits for both GPUs
    # more ranks than GPUs: gloo on CPU processes
    wide = place(gpus, 4, all_slots(gpus))
    assert wide is not None and wide.kind == "cpu"


def test_results_are_strict_json() -> None:
    assert plain({"a": [float("inf"), 1.0, {"b": float("nan")}]}) == {"a": ["inf", 1.0, {"b": "nan"}]}
