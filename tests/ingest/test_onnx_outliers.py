"""Scaling a down-projection's outlier input channels into its weights (the int8 export's recipe)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from ingest.onnx_export import OUTLIER_RATIO, down_projections, scale_outlier_channels, tensors_as_outputs

RNG = np.random.default_rng(7)
W_DOWN = RNG.normal(0, 0.2, (8, 4)).astype(np.float32)
W_SIDE = RNG.normal(0, 0.2, (8, 4)).astype(np.float32)
OUTLIER = 3


def _model() -> onnx.ModelProto:
    """x -> Gelu -> MatMul(W_DOWN) = down, and x -> MatMul(W_SIDE) = side (not after a GELU)."""
    nodes = [
        helper.make_node("Gelu", ["x"], ["g"], name="gelu"),
        helper.make_node("MatMul", ["g", "w_down"], ["down"], name="down"),
        helper.make_node("MatMul", ["x", "w_side"], ["side"], name="side"),
    ]
    graph = helper.make_graph(
        nodes, "ffn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 8])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [None, 4]) for name in ("down", "side")],
        [numpy_helper.from_array(W_DOWN, "w_down"), numpy_helper.from_array(W_SIDE, "w_side")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=10)


def _run(model: onnx.ModelProto, x: np.ndarray, *names: str) -> list[np.ndarray]:
    """The named tensors of the model on x (any intermediate one made an output first)."""
    probe = tensors_as_outputs(model, list(names))
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    return list(session.run(list(names), {"x": x}))


def _inputs() -> np.ndarray:
    x = RNG.uniform(-1, 1.5, (16, 8)).astype(np.float32)
    x[:, OUTLIER] *= 30  # one channel far above the rest, as in a transformer's GELU output
    return x


def test_only_matmuls_reading_a_gelu_are_down_projections() -> None:
    assert [node.name for node in down_projections(_model().graph)] == ["down"]


def test_outlier_channel_moves_into_the_weights_and_the_product_is_unchanged() -> None:
    model, x = _model(), _inputs()
    down, side, g = _run(model, x, "down", "side", "g")
    peaks = np.abs(g).max(axis=0)
    assert scale_outlier_channels(model.graph, down_projections(model.graph), [peaks]) == 1
    fed_name = next(node for node in model.graph.node if node.name == "down").input[0]
    assert fed_name != "g"
    down_after, side_after, fed = _run(model, x, "down", "side", fed_name)
    # In float the product is the same: only where the factor sits has moved.
    assert np.allclose(down_after, down, rtol=1e-5, atol=1e-5)
    assert np.array_equal(side_after, side)
    # The MatMul reads the outlier channel scaled down to the bound, every other channel as it was.
    bound = OUTLIER_RATIO * np.median(peaks)
    assert np.abs(g[:, OUTLIER]).max() > 10 * bound
    assert np.isclose(np.abs(fed[:, OUTLIER]).max(), bound, rtol=1e-5)
    others = [c for c in range(8) if c != OUTLIER]
    assert np.array_equal(fed[:, others], g[:, others])


def test_a_layer_without_outliers_is_left_alone() -> None:
    model = _model()
    x = RNG.uniform(-1, 1.5, (16, 8)).astype(np.float32)
    (g,) = _run(model, x, "g")
    before = model.SerializeToString()
    assert scale_outlier_channels(model.graph, down_projections(model.graph), [np.abs(g).max(axis=0)]) == 0
    assert model.SerializeToString() == before


def test_a_weight_that_another_node_reads_is_left_alone() -> None:
    model, x = _model(), _inputs()
    next(node for node in model.graph.node if node.name == "side").input[1] = "w_down"  # both read w_down
    (g,) = _run(model, x, "g")
    assert scale_outlier_channels(model.graph, down_projections(model.graph), [np.abs(g).max(axis=0)]) == 0
    assert [node.name for node in model.graph.node] == ["gelu", "down", "side"]
