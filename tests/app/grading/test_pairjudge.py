"""The pair judge is served only as its manifest describes it, and the runtime says when it is not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from app.config import JUDGE_DIR
from app.grading.decision import VERDICTS, Decision
from app.grading.pairjudge import (
    JUDGE_LABELS,
    MANIFEST,
    MAX_LENGTH,
    ONNX_FILE,
    JudgeArtifactError,
    PairJudge,
    pair_text,
)


@pytest.fixture
def judge_copy(tmp_path: Path) -> Path:
    """A copy of the committed judge that a test may damage."""
    target = tmp_path / "judge"
    shutil.copytree(JUDGE_DIR, target)
    return target


def test_the_committed_judge_loads_and_gives_probabilities(judge_copy: Path) -> None:
    judge = PairJudge(judge_copy)
    probs = judge.probabilities([
        ("What does all-gather do?", "every rank ends with all ranks' chunks", "each rank gets the full tensor"),
        ("What does all-gather do?", "every rank ends with all ranks' chunks", "x " * 400),  # longer than it reads
    ])
    assert probs.shape == (2, len(JUDGE_LABELS))
    assert np.allclose(probs.sum(axis=1), 1.0, atol=1e-4)
    assert judge.probabilities([]).shape == (0, len(JUDGE_LABELS))


def test_a_pairs_reading_is_the_same_whatever_is_read_with_it(judge_copy: Path) -> None:
    """Dynamic int8 scales a run's activations over the whole batch: read beside others, a pair's
    probabilities moved (by up to 0.57 on the dev set). Each pair is its own run."""
    judge = PairJudge(judge_copy)
    q, ref = "What does all-gather do?", "every rank ends with all ranks' chunks"
    pairs = [(q, ref, "each rank gets the full tensor"), (q, ref, "it sums the tensors"),
             (q, "It sums the tensors and sends the sum to every rank", "each rank gets the full tensor"),
             (q, ref, "every rank receives the chunk of every other rank, so all of them hold it " * 20)]
    alone = np.concatenate([judge.probabilities([p]) for p in pairs])
    assert np.array_equal(judge.probabilities(pairs), alone)
    assert np.array_equal(judge.probabilities(pairs[::-1]), alone[::-1])


def test_an_answer_too_long_to_fit_alone_is_cut_longest_first_as_in_training(judge_copy: Path) -> None:
    """The fallback tokenizer is built only when an answer needs it, and cuts as `longest_first` does."""
    from tokenizers import Tokenizer

    judge = PairJudge(judge_copy)
    question, reference = "What does all-gather do?", "every rank ends with all ranks' chunks"
    judge.probabilities([(question, reference, "each rank gets the full tensor")])
    assert judge._fallback is None  # a short answer fits: no second tokenizer held
    long_answer = "every rank receives the chunk of every other rank, so all of them hold it " * 20
    got = judge.probabilities([(question, reference, long_answer)])
    assert judge._fallback is not None

    expected = Tokenizer.from_file(str(judge_copy / "tokenizer.json"))
    expected.no_padding()
    expected.enable_truncation(max_length=int(judge.manifest.get("max_length", MAX_LENGTH)), strategy="longest_first")
    e = expected.encode(pair_text(question, reference), long_answer)
    feeds = {"input_ids": np.array([e.ids]), "attention_mask": np.array([e.attention_mask]),
             "token_type_ids": np.array([e.type_ids])}
    inputs = {i.name for i in judge._session.get_inputs()}
    logits = judge._session.run(None, {k: v.astype(np.int64) for k, v in feeds.items() if k in inputs})[0]
    want = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    assert np.allclose(got, want, atol=1e-5)
    fallback = judge._fallback
    judge.probabilities([(question, reference, long_answer)])
    assert judge._fallback is fallback  # built once


def test_a_judge_trained_without_the_question_reads_the_accepted_answer_alone(judge_copy: Path) -> None:
    assert pair_text("Q?", "ref") == "ref (question: Q?)"
    assert pair_text("Q?", "ref", with_question=False) == "ref"
    reference, answer = "every rank ends with all ranks' chunks", "each rank gets the full tensor"
    asked = [("What does all-gather do?", reference, answer), ("Why is the sky blue?", reference, answer)]
    shipped = PairJudge(judge_copy)
    assert shipped.with_question  # the committed judge's recipe records no `question`: it reads it
    first, other = shipped.probabilities(asked)
    assert not np.allclose(first, other, atol=1e-4)
    manifest = json.loads((judge_copy / MANIFEST).read_text())
    manifest["recipe"]["question"] = False
    (judge_copy / MANIFEST).write_text(json.dumps(manifest))
    without = PairJudge(judge_copy)
    assert not without.with_question
    first, other = without.probabilities(asked)
    assert np.allclose(first, other)


@pytest.mark.parametrize("name", [ONNX_FILE, "tokenizer.json"])
def test_a_flipped_byte_in_the_model_or_its_tokenizer_is_refused(judge_copy: Path, name: str) -> None:
    model = judge_copy / name
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    model.write_bytes(bytes(data))
    with pytest.raises(JudgeArtifactError, match="does not match its manifest"):
        PairJudge(judge_copy)


@pytest.mark.parametrize("name", [ONNX_FILE, "tokenizer.json", MANIFEST])
def test_a_missing_file_is_refused_without_the_servers_path(judge_copy: Path, name: str) -> None:
    (judge_copy / name).unlink()
    with pytest.raises(JudgeArtifactError) as caught:
        PairJudge(judge_copy)
    assert str(judge_copy.parent) not in str(caught.value)


def test_a_judge_with_other_labels_is_refused(judge_copy: Path) -> None:
    manifest = json.loads((judge_copy / MANIFEST).read_text())
    manifest["labels"] = ["yes", "no", "maybe"]
    (judge_copy / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(JudgeArtifactError, match="labels"):
        PairJudge(judge_copy)


def test_a_decision_fitted_on_other_features_is_refused() -> None:
    d = Decision(np.zeros(2), np.ones(2), np.zeros((3, 2)), np.zeros(3), "v").to_dict()
    d["features"] = ["a", "b"]
    with pytest.raises(ValueError, match="other features"):
        Decision.from_dict(d)
    assert VERDICTS == JUDGE_LABELS  # the judge's classes are the decision's verdicts, in the same order
