"""The late-interaction judge measured beside the pair judge (grading_lab/late_judge.py), on a small
random BERT: what it reads of a pair must not depend on what it is read with, and its lower states
must be the frozen model's own."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from grading_lab.late_judge import LateJudge, _mask, _run, lower_states  # noqa: E402


class _Tokenizer:
    """Words to ids, with [CLS] (1) and [SEP] (2), as the lower pass asks of a tokenizer."""

    def __call__(self, texts: list[str], truncation: bool, max_length: int, padding: bool,
                 return_tensors: str) -> dict[str, object]:
        rows = [[1, *(3 + sum(map(ord, w)) % 90 for w in t.split()), 2][:max_length] for t in texts]
        width = max(map(len, rows))
        ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
        return {"input_ids": ids, "token_type_ids": torch.zeros_like(ids), "attention_mask": mask}


@pytest.fixture(scope="module")
def bert() -> object:
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64, attn_implementation="eager")
    return transformers.BertModel(config).eval()


def test_lower_states_are_the_frozen_layers_of_each_text_alone(bert: object) -> None:
    texts = ["all reduce sums gradients", "ring"]
    states = lower_states(_Tokenizer(), bert, texts, 2, 16)
    enc = _Tokenizer()(["ring"], True, 16, True, "pt")
    with torch.no_grad():
        alone = bert(**enc, output_hidden_states=True).hidden_states[2][0]
    assert states["ring"].shape == (3, 32)
    assert torch.allclose(states["ring"], alone, atol=1e-5)
    assert states[texts[0]].shape == (6, 32)  # its own length: no padding kept


def test_a_pairs_reading_does_not_depend_on_its_batch_mates(bert: object) -> None:
    states = lower_states(_Tokenizer(), bert, ["the accepted answer here", "a much longer accepted answer " * 3,
                                               "short", "another answer entirely"], 2, 32)
    judge = LateJudge(bert, 2)
    judge.train(False)
    first, answer = states["the accepted answer here"], states["short"]
    with torch.no_grad():
        alone = judge.logits([first], [answer])
        batched = judge.logits([states["a much longer accepted answer " * 3], first],
                               [states["another answer entirely"], answer])
    assert torch.allclose(alone[0], batched[1], atol=1e-5)
    assert alone.shape == (1, 3)


def test_the_segment_vector_marks_the_answer(bert: object) -> None:
    states = lower_states(_Tokenizer(), bert, ["ring all reduce", "tree"], 2, 16)
    judge = LateJudge(bert, 2)
    judge.train(False)
    with torch.no_grad():
        before = judge.logits([states["ring all reduce"]], [states["tree"]])
        judge.segment.add_(1.0)
        after = judge.logits([states["ring all reduce"]], [states["tree"]])
    assert not torch.allclose(before, after)
    assert _run(judge.layers, states["tree"][None], _mask([3], 3)).shape == (1, 3, 32)
