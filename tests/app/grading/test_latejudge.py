"""The late judge reads the serving encoder's own states, as its manifest says, with the real weights.

The judge here is the bundled MiniLM's last two layers with a fresh head, exported as
`tutor models train-judge --late` exports a trained one: what is tested is how it is fed and served,
not what it has learned (tests/app/grading/test_hard_cases.py grades with the shipped judge).
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from app.grading import judges
from app.grading.latejudge import FIRST_MAX, KIND, LateJudge, is_late
from app.grading.pairjudge import JUDGE_LABELS, MANIFEST, ONNX_FILE, JudgeArtifactError, pair_text
from ingest.embedder import Encoder
from ingest.identity import file_sha256
from ingest.onnx_encoder import RECENT_STATES, EncoderArtifactError, OnnxEncoder, with_outputs

pytestmark = pytest.mark.slow

SPLIT = 4
Q = "What does all-gather do?"
REF = "every rank ends with the concatenation of all ranks' chunks"


@pytest.fixture(scope="module")
def states_encoder(onnx_encoder_dir: Path, real_encoder: Encoder) -> OnnxEncoder:
    return OnnxEncoder(onnx_encoder_dir, real_encoder.model_id, threads=1, states_layer=SPLIT - 1)


@pytest.fixture(scope="module")
def late_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    from grading_lab.judge_train import LATE_RECIPE
    from grading_lab.late_judge import LateJudge as Trainable
    from grading_lab.late_judge import _load, export_joined

    torch.manual_seed(0)
    _, bert = _load()
    folder = tmp_path_factory.mktemp("late") / "judge"
    folder.mkdir()
    export_joined(Trainable(bert, SPLIT), bert.config, folder / ONNX_FILE)
    manifest = {"kind": KIND, "recipe": asdict(LATE_RECIPE), "labels": list(JUDGE_LABELS),
                "states_layer": SPLIT - 1, "first_max": FIRST_MAX, "onnx_sha256": file_sha256(folder / ONNX_FILE)}
    (folder / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    return folder


@pytest.fixture
def late_copy(late_dir: Path, tmp_path: Path) -> Path:
    """A copy of the late judge that a test may damage."""
    return Path(shutil.copytree(late_dir, tmp_path / "judge"))


def test_an_encode_keeps_the_states_a_fresh_run_gives(states_encoder: OnnxEncoder, onnx_encoder_dir: Path,
                                                       real_encoder: Encoder) -> None:
    answer = "each rank ends up holding every rank's chunk"
    states_encoder.encode([answer])
    kept = states_encoder._kept(answer)
    fresh = OnnxEncoder(onnx_encoder_dir, real_encoder.model_id, threads=1, states_layer=SPLIT - 1)
    assert fresh._kept(answer) is None
    (read,) = fresh.layer_states([answer])
    assert kept is not None and kept.shape == read.shape == (len(fresh._tokenizer.encode(answer).ids), 384)
    assert np.allclose(kept, read, atol=1e-5)


def test_a_first_text_is_cut_to_the_judges_length_and_never_read_from_the_kept_states(
        states_encoder: OnnxEncoder) -> None:
    long = "the reduce-scatter phase sends one chunk per step around the ring " * 20
    states_encoder.encode([long])
    (cut,) = states_encoder.layer_states([long], FIRST_MAX)
    (whole,) = states_encoder.layer_states([long])
    assert cut.shape[0] == FIRST_MAX and whole.shape[0] > FIRST_MAX


def test_the_kept_states_are_bounded(states_encoder: OnnxEncoder) -> None:
    states_encoder.encode([f"answer number {i}" for i in range(RECENT_STATES + 5)])
    assert len(states_encoder._recent) == RECENT_STATES
    assert states_encoder._kept("answer number 0") is None
    assert states_encoder._kept(f"answer number {RECENT_STATES + 4}") is not None


def test_an_encoder_built_without_states_keeps_none(onnx_encoder_dir: Path, real_encoder: Encoder) -> None:
    plain = OnnxEncoder(onnx_encoder_dir, real_encoder.model_id, threads=1)
    plain.encode(["an answer"])
    assert not plain._recent
    with pytest.raises(RuntimeError, match="keeps no layer states"):
        plain.layer_states(["an answer"])


def test_a_tensor_the_export_lacks_is_refused(onnx_encoder_dir: Path) -> None:
    with pytest.raises(EncoderArtifactError, match="no tensor"):
        with_outputs(onnx_encoder_dir / "model-int8.onnx", ["/no/such/tensor"])


def test_a_pairs_reading_does_not_depend_on_what_it_is_read_with(late_dir: Path,
                                                                 states_encoder: OnnxEncoder) -> None:
    judge = LateJudge(late_dir, states_encoder)
    pair = (Q, REF, "each rank gets the full tensor")
    alone = judge.probabilities([pair])
    mixed = judge.probabilities([(Q, "a much longer accepted answer " * 8, "x " * 300), pair,
                                 ("What is ZeRO?", "it shards optimizer state", "idk")])
    assert alone.shape == (1, len(JUDGE_LABELS)) and np.allclose(alone.sum(), 1.0, atol=1e-5)
    assert np.array_equal(alone[0], mixed[1])


def test_the_served_pass_agrees_with_the_pytorch_layers_it_was_exported_from(late_dir: Path,
                                                                             states_encoder: OnnxEncoder) -> None:
    """The int8 export of the joined layers against the same layers in PyTorch fp32, fed the same states."""
    import torch

    from grading_lab.late_judge import LateJudge as Trainable
    from grading_lab.late_judge import _load

    torch.manual_seed(0)
    _, bert = _load()
    trainable = Trainable(bert, SPLIT)
    trainable.train(False)
    judge = LateJudge(late_dir, states_encoder)
    answers = ["each rank gets the full tensor", "only rank zero gets the result", "idk", "it sums the gradients"]
    served = judge.probabilities([(Q, REF, a) for a in answers])
    (first,) = states_encoder.layer_states([pair_text(Q, REF)], FIRST_MAX)
    first16 = torch.from_numpy(first.astype(np.float16).astype(np.float32))
    with torch.no_grad():
        exact = np.stack([torch.softmax(trainable.logits([first16], [torch.from_numpy(s)])[0], -1).numpy()
                          for s in states_encoder.layer_states(answers)])
    assert np.abs(served - exact).max() < 0.05


def test_a_damaged_or_mislabelled_late_judge_is_refused(late_copy: Path, states_encoder: OnnxEncoder) -> None:
    manifest = json.loads((late_copy / MANIFEST).read_text(encoding="utf-8"))
    (late_copy / MANIFEST).write_text(json.dumps({**manifest, "labels": ["correct", "incorrect", "partial"]}),
                                      encoding="utf-8")
    with pytest.raises(JudgeArtifactError, match="labels"):
        LateJudge(late_copy, states_encoder)
    (late_copy / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    with (late_copy / ONNX_FILE).open("ab") as f:
        f.write(b"\0")
    with pytest.raises(JudgeArtifactError, match="does not match its manifest"):
        LateJudge(late_copy, states_encoder)
    (late_copy / ONNX_FILE).unlink()
    with pytest.raises(JudgeArtifactError, match="missing"):
        LateJudge(late_copy, states_encoder)


def test_an_encoder_keeping_another_layer_is_refused(late_dir: Path, onnx_encoder_dir: Path,
                                                     real_encoder: Encoder) -> None:
    other = OnnxEncoder(onnx_encoder_dir, real_encoder.model_id, threads=1, states_layer=SPLIT - 2)
    with pytest.raises(JudgeArtifactError, match="reads encoder layer"):
        LateJudge(late_dir, other)


def test_the_runtimes_encoder_is_read_through_its_wrappers(late_dir: Path, states_encoder: OnnxEncoder) -> None:
    class Wrapper:
        def __init__(self, inner: object) -> None:
            self.inner = inner

    judge = judges.load_judge(late_dir, Wrapper(Wrapper(states_encoder)))
    assert isinstance(judge, LateJudge) and judge._encoder is states_encoder
    assert is_late(late_dir) and not is_late(late_dir.parent)


def test_a_serving_encoder_that_keeps_no_states_leaves_the_late_judge_its_own(
        late_dir: Path, states_encoder: OnnxEncoder, real_encoder: Encoder, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """The PyTorch fallback (or a test's encoder) keeps no states: the judge still grades, with an
    int8 encoder of its own (a second encode of each answer, said in the log)."""
    judges._offline_late_judge.cache_clear()
    monkeypatch.setattr(judges, "own_encoder", lambda layer, settings=None: states_encoder)
    with caplog.at_level(logging.WARNING, logger="app.grading.judges"):
        judge = judges.load_judge(late_dir, real_encoder)
    judges._offline_late_judge.cache_clear()
    assert isinstance(judge, LateJudge) and judge._encoder is states_encoder
    assert "encodes answers again" in caplog.text


def test_a_judge_trained_on_another_encoder_export_is_served_with_a_warning(
        late_copy: Path, states_encoder: OnnxEncoder, caplog: pytest.LogCaptureFixture) -> None:
    manifest = json.loads((late_copy / MANIFEST).read_text(encoding="utf-8"))
    (late_copy / MANIFEST).write_text(json.dumps({**manifest, "encoder": {"onnx_sha256": states_encoder.onnx_sha256}}),
                                      encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="app.grading.latejudge"):
        LateJudge(late_copy, states_encoder)
    assert not caplog.text
    (late_copy / MANIFEST).write_text(json.dumps({**manifest, "encoder": {"onnx_sha256": "0" * 64}}),
                                      encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="app.grading.latejudge"):
        judge = LateJudge(late_copy, states_encoder)
    assert "another export" in caplog.text and judge.probabilities([(Q, REF, "idk")]).shape == (1, 3)
