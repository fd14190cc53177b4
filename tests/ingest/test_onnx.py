"""The int8 ONNX serving encoder against the PyTorch model, with the real weights."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ingest.embedder import Encoder
from ingest.onnx_encoder import EncoderArtifactError, OnnxEncoder, read_manifest
from ingest.parsers import parse_document
from tests.conftest import ROOT, SEEDS

pytestmark = pytest.mark.slow


def _bank_and_dev_texts() -> list[str]:
    texts = []
    for path in sorted(SEEDS.iterdir()):
        for q in parse_document(path).questions:
            texts += [q.text, *q.accepted_answers, *q.wrong_options, *([q.explanation] if q.explanation else [])]
    dev = ROOT / "data" / "eval" / "dev.jsonl"
    texts += [json.loads(line)["answer"] for line in dev.read_text(encoding="utf-8").splitlines()]
    return texts


def test_vectors_agree_with_pytorch_on_bank_and_dev_set(onnx_encoder_dir: Path, real_encoder: Encoder) -> None:
    onnx = OnnxEncoder(onnx_encoder_dir, real_encoder.model_id)
    texts = _bank_and_dev_texts()
    cos = np.sum(onnx.encode(texts) * real_encoder.encode(texts), axis=1)
    print(f"cosine int8 vs fp32 over {len(texts)} texts: mean {cos.mean():.4f}, min {cos.min():.4f}")
    assert cos.mean() >= 0.99 and cos.min() >= 0.95
    manifest = read_manifest(onnx_encoder_dir)
    assert manifest["model_id"] == real_encoder.model_id and len(str(manifest["sha256"])) == 64


def test_a_texts_vector_is_the_same_whatever_it_is_batched_with(onnx_encoder_dir: Path,
                                                                real_encoder: Encoder) -> None:
    """Dynamic int8 scales a run's activations over the whole batch: a batch-mate of similar length
    moved a short answer's vector. An answer's grade must not depend on who else was being graded,
    so its vector is exactly the one it has alone, beside any others."""
    onnx = OnnxEncoder(onnx_encoder_dir, real_encoder.model_id, threads=1, solo_threads=2)
    texts = ["idk", "TP: each GPU holds a slice of the weights", "each GPU keeps a slice of every weight matrix"]
    alone = np.stack([onnx.encode([t])[0] for t in texts])
    mates = ["x " * 200, "the pipeline splits the mini-batch into micro-batches", "ZeRO shards the optimizer state"]
    mixed = onnx.encode([mates[1], texts[0], mates[0], texts[1], mates[2], texts[2]])
    assert np.array_equal(alone, mixed[[1, 3, 5]])
    # The solo session runs the same operators on more threads (bit for bit the same here; a tolerance
    # for another CPU's kernels).
    assert np.allclose(alone, onnx.encode_alone(texts), atol=1e-6)
    assert len(onnx._tokenizer.encode_batch(["short one"])[0].ids) < 16  # no padding to the shipped 128


def test_export_for_another_model_is_refused(onnx_encoder_dir: Path) -> None:
    with pytest.raises(EncoderArtifactError, match="tutor models export"):
        OnnxEncoder(onnx_encoder_dir, "some-other-model@123")


def test_serving_path_does_not_import_torch(onnx_encoder_dir: Path, tmp_path: Path) -> None:
    index = tmp_path / "index"
    from tests.conftest import with_onnx

    with_onnx(index, onnx_encoder_dir)
    code = (
        "import sys\n"
        "from app.config import Settings\n"
        "from app.serving.encoders import default_encoder\n"
        f"enc = default_encoder(Settings(index_dir={str(index)!r}, encoder_backend='onnx'))\n"
        "assert enc.encode(['hello']).shape == (1, 384)\n"
        "import app.main, app.cli.main\n"
        "heavy = ('torch', 'sentence_transformers', 'transformers')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


class _AsServed:
    """The bank's vectors as ingestion embeds them (PyTorch), the learners' answers as the API does (int8)."""

    def __init__(self, rubric: Encoder, answers: Encoder, answer_texts: set[str]) -> None:
        self.rubric, self.answers, self.answer_texts = rubric, answers, answer_texts
        self.model_id, self.dim = rubric.model_id, rubric.dim

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        ours = [t in self.answer_texts for t in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for encoder, wanted in ((self.answers, True), (self.rubric, False)):
            rows = [i for i, o in enumerate(ours) if o is wanted]
            if rows:
                out[rows] = encoder.encode([texts[i] for i in rows])
        return out


def test_dev_set_verdicts_do_not_get_worse(onnx_encoder_dir: Path, real_encoder: Encoder) -> None:
    """Graded as the bank is served (accepted answers embedded by PyTorch at ingestion, the answer by
    int8) and as the inline form is (everything int8), the dev set's figures and verdicts are PyTorch's."""
    from grading_lab.evaluation import evaluate

    path = ROOT / "data" / "eval" / "dev.jsonl"
    answers = {json.loads(line)["answer"] for line in path.read_text().splitlines() if line.strip()}
    onnx = OnnxEncoder(onnx_encoder_dir, real_encoder.model_id)
    torch_report = evaluate(path, real_encoder)
    for way, encoder in (("bank", _AsServed(real_encoder, onnx, answers)), ("inline", onnx)):
        onnx_report = evaluate(path, encoder)
        agree = sum(a == b for a, b in zip(onnx_report.verdicts, torch_report.verdicts, strict=True))
        print(
            f"torch 3-way {torch_report.macro_f1_3:.3f} 2-way {torch_report.macro_f1_2:.3f}; "
            f"int8 ({way}) 3-way {onnx_report.macro_f1_3:.3f} 2-way {onnx_report.macro_f1_2:.3f}, "
            f"{agree} of {onnx_report.n} verdicts as PyTorch's"
        )
        assert onnx_report.macro_f1_3 >= torch_report.macro_f1_3 - 0.01
        assert onnx_report.macro_f1_2 >= torch_report.macro_f1_2 - 0.01
        # Answer by answer, the int8 encoder's verdicts are PyTorch's; the bound leaves room for another
        # CPU's float rounding near a decision boundary.
        assert len(onnx_report.verdicts) == onnx_report.n and agree >= 0.98 * onnx_report.n, way


def test_every_weight_matmul_is_int8_with_the_outliers_scaled(onnx_encoder_dir: Path) -> None:
    import onnx

    graph = onnx.load(str(onnx_encoder_dir / "model-int8.onnx")).graph
    weights = {init.name for init in graph.initializer}
    assert not [n.name for n in graph.node if n.op_type == "MatMul" and set(n.input) & weights]
    scaled = [n for n in graph.node if n.op_type == "Mul" and n.name.endswith("/outliers")]
    assert len(scaled) == 6  # one per layer's down-projection
    assert int(read_manifest(onnx_encoder_dir)["outlier_channels_scaled"]) > 0  # type: ignore[call-overload]


def test_an_export_of_an_older_recipe_is_made_again(onnx_encoder_dir: Path, tmp_path: Path) -> None:
    from ingest.embedder import DEFAULT_MODEL
    from ingest.onnx_export import QUANTISATION, export_encoder

    folder = tmp_path / "encoders" / onnx_encoder_dir.name
    shutil.copytree(onnx_encoder_dir, folder)
    assert not export_encoder(DEFAULT_MODEL, tmp_path).exported  # the current recipe: kept
    manifest = read_manifest(folder)
    manifest["quantisation"] = "dynamic int8 (7-bit weights), per channel; layers 0-1 FFN down-projections fp32"
    (folder / "encoder.json").write_text(json.dumps(manifest), encoding="utf-8")
    again = export_encoder(DEFAULT_MODEL, tmp_path)
    assert again.exported and read_manifest(folder)["quantisation"] == QUANTISATION


def test_concurrent_encodes_give_the_serial_vectors(onnx_encoder_dir: Path, real_encoder: Encoder) -> None:
    import threading

    onnx = OnnxEncoder(onnx_encoder_dir, real_encoder.model_id)
    texts = [f"ring all-reduce moves {i} chunks around the ring" for i in range(24)]
    serial = [onnx.encode([t]) for t in texts]
    out: dict[int, np.ndarray] = {}

    def run(k: int) -> None:
        for i in range(k, len(texts), 4):
            out[i] = onnx.encode([texts[i]])

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.allclose(out[i], serial[i], atol=1e-6) for i in range(len(texts)))


def test_encode_alone_runs_a_wider_session_with_the_same_vectors(onnx_encoder_dir: Path, real_encoder: Encoder) -> None:
    onnx = OnnxEncoder(onnx_encoder_dir, real_encoder.model_id, threads=1, solo_threads=2)
    assert onnx._solo is not onnx._session and onnx.solo_threads == 2
    texts = ["ring all-reduce moves chunks around the ring", "idk", "ZeRO-3 shards parameters, gradients and states"]
    # Thread count changes how onnxruntime splits the sums, not the result beyond float rounding.
    assert np.allclose(onnx.encode_alone(texts), onnx.encode(texts), atol=1e-5)
    narrow = OnnxEncoder(onnx_encoder_dir, real_encoder.model_id, threads=2, solo_threads=2)
    assert narrow._solo is narrow._session and narrow.solo_threads == 2  # no second session when it is no wider


def test_only_the_solo_session_spins_and_it_stops_when_its_run_returns(onnx_encoder_dir: Path,
                                                                        real_encoder: Encoder) -> None:
    onnx = OnnxEncoder(onnx_encoder_dir, real_encoder.model_id, threads=1, solo_threads=2)

    def config(session: object, key: str) -> str:
        return str(session.get_session_options().get_session_config_entry(key))  # type: ignore[attr-defined]

    assert config(onnx._session, "session.intra_op.allow_spinning") == "0"
    assert config(onnx._solo, "session.intra_op.allow_spinning") == "1"
    assert config(onnx._solo, "session.force_spinning_stop") == "1"


def test_an_answer_graded_in_a_batch_gets_what_it_gets_alone(onnx_encoder_dir: Path, real_encoder: Encoder) -> None:
    """`/v1/grade/batch` encodes its answers in one call, and concurrent requests share the batcher's
    calls: neither may move an answer's verdict or score."""
    from app.grading import grade_many, prepare_many
    from grading_lab.evaluation import bank_items

    items = bank_items()
    rows = [json.loads(line) for line in (ROOT / "data" / "eval" / "dev.jsonl").read_text().splitlines()][::9]
    onnx = OnnxEncoder(onnx_encoder_dir, real_encoder.model_id)
    rubrics = dict(zip(items, prepare_many(list(items.values()), onnx), strict=True))
    targets = [rubrics[(r["file"], int(r["number"]))] for r in rows]
    together = grade_many(targets, [r["answer"] for r in rows], onnx)
    alone = [grade_many([t], [r["answer"]], onnx)[0] for t, r in zip(targets, rows, strict=True)]
    assert [(g.verdict, g.score) for g in together] == [(g.verdict, g.score) for g in alone]
