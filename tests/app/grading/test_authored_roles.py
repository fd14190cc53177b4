"""Authored roles (data/roles.yaml): swaps written in other words than the accepted answer's."""

from __future__ import annotations

import pytest

from app.grading.roles import authored_roles, cues_confirmed, cues_stated, cues_swapped, parse_roles
from grading_lab.evaluation import bank_items

SYNC_ASYNC = "q_c404f730f66d"
DP_DDP = "q_519f2c2810fc"
FAST_SLOW = "q_95bb719cc191"
BF16_FP16 = "q_66ce346e4ab2"
NCCL_GLOO = "q_3344d507e37e"
ONE_F_ONE_B = "q_437d36a4d517"
FP8 = "q_84293c0738bd"
BROADCAST = "q_d01fdd90721c"
CHECKPOINT_FREQUENCY = "q_84638d423abd"
DP_MP = "q_17e0a4db2d54"


@pytest.mark.parametrize(("qid", "answer", "said_of", "belongs_to"), [
    (SYNC_ASYNC, "sync SGD: workers push updates whenever they finish; async SGD: everybody waits", "sync SGD",
     "async SGD"),
    (SYNC_ASYNC, "in asynchronous sgd the workers meet at a barrier every step", "async SGD", "sync SGD"),
    (DP_DDP, "DDP keeps all GPUs in one multithreaded process, and DataParallel uses multiple processes", "DDP",
     "DataParallel"),
    (FAST_SLOW, "bounded staleness has the slow workers blocked until the fast ones are done", "slow workers",
     "fast workers"),
    # a name after "than" is what the subject is compared with: the words after it still go with the subject
    (BF16_FP16, "bf16 has fewer exponent bits than fp16 so it overflows more easily", "bf16", "fp16"),
    (NCCL_GLOO, "Gloo is faster than NCCL on GPUs because it uses NVLink and RDMA", "Gloo", "NCCL"),
    # an answer that names no side speaks of the question's own subject
    (ONE_F_ONE_B, "It runs all the forward micro-batches first and then all the backward ones", "1F1B", "GPipe"),
    (FP8, "E4M3 is for the gradients in the backward pass, E5M2 for the forward activations", "E4M3", "E5M2"),
    (BROADCAST, "every rank sends its tensor to rank 0", "all ranks", "source rank"),
    (CHECKPOINT_FREQUENCY, "checkpointing too often loses more work on a crash, and checkpointing rarely costs I/O",
     "frequent checkpoints", "rare checkpoints"),
])
def test_a_side_given_only_the_other_sides_words_is_a_swap(qid: str, answer: str, said_of: str,
                                                            belongs_to: str) -> None:
    swap = cues_swapped(answer, authored_roles()[qid])
    assert swap is not None
    assert (swap.said_of, swap.belongs_to) == (said_of, belongs_to)
    assert swap.cue in answer.lower()


@pytest.mark.parametrize(("qid", "answer"), [
    # right answers, in several styles
    (SYNC_ASYNC, "sync SGD waits for every worker and averages each step; async SGD updates whenever a worker is done"),
    (SYNC_ASYNC, "async is faster because nobody waits"),  # a denial says what a side does not do
    (SYNC_ASYNC, "async SGD doesn't wait at a barrier, so its gradients can be stale"),
    (DP_DDP, "DDP avoids the GIL and the GPU 0 bottleneck that DataParallel has"),
    (DP_DDP, "unlike DataParallel's threads, DDP runs one process per GPU"),
    # the words after a later name go with that name
    (FAST_SLOW, "the fast workers are blocked until the slow workers catch up"),
    # comparatives, and the other side named in passing
    (BF16_FP16, "bf16 has a wider range than fp16, which overflows more easily"),
    (BF16_FP16, "bf16 has more exponent bits than fp16 so it doesn't overflow"),
    (NCCL_GLOO, "It wins over Gloo for GPU tensors since it uses NVLink and RDMA"),
    (NCCL_GLOO, "nccl is faster then gloo cause it uses nvlink"),
    (FAST_SLOW, "it caps how far the fast workers get ahead of the slow ones; then they wait for them"),
    # a cue that holds a denial word is a cue, not a denial
    (BF16_FP16, "bf16 has fewer mantissa bits but the same range as fp32"),
    # a name after "to" or "from" is where something goes: the words before it are not its
    (BROADCAST, "broadcast sends the tensor to every rank, e.g. the initial weights"),
    (BROADCAST, "every rank receives a copy of the root's tensor"),
    # a name right after a cue is what the cue acts on: scatter told as broadcast is wrong, not a swap
    (BROADCAST, "broadcast sends each rank a different chunk of the source tensor"),
    # the implied side only when the answer names none
    (ONE_F_ONE_B, "GPipe runs all the forwards first; 1F1B alternates one forward and one backward"),
    (ONE_F_ONE_B, "it alternates one forward and one backward per stage, so at most p micro-batches are in flight"),
    # no side named, or no side's words: nothing to read
    (SYNC_ASYNC, "workers wait for each other"),
    (SYNC_ASYNC, "sync and async SGD are two ways to train"),
])
def test_a_right_or_silent_answer_is_not_a_swap(qid: str, answer: str) -> None:
    assert cues_swapped(answer, authored_roles()[qid]) is None


def test_one_confirmed_side_outweighs_a_crossed_one() -> None:
    """A mixed answer is wrong in another way (it is graded by the decision), not a clean swap."""
    answer = "sync SGD waits at a barrier. async SGD also averages the gradients"
    assert cues_swapped(answer, authored_roles()[SYNC_ASYNC]) is None


@pytest.mark.parametrize(("qid", "answer", "confirmed"), [
    (DP_MP, "DP copies the model and splits data; MP splits the model.", True),
    (SYNC_ASYNC, "sync SGD waits at a barrier every step", True),
    (DP_MP, "Data parallelism splits the model; model parallelism splits the data", False),  # a swap
    (SYNC_ASYNC, "sync SGD waits at a barrier. async SGD also averages the gradients", False),  # one crossed
    (SYNC_ASYNC, "sync and async SGD are two ways to train", False),  # no side's words
    (SYNC_ASYNC, "async SGD does not wait for the others", False),  # a denial: nothing read
])
def test_an_answer_that_gives_a_side_its_own_words_and_none_another_confirms_the_roles(
        qid: str, answer: str, confirmed: bool) -> None:
    assert cues_confirmed(answer, authored_roles()[qid]) is confirmed


def test_every_authored_question_is_in_the_bank() -> None:
    keys = {item.key for item in bank_items().values()}
    assert set(authored_roles()) <= keys
    assert len(authored_roles()) >= 5


def test_a_cue_shared_by_two_sides_is_refused() -> None:
    raw = {"questions": [{"id": "q_x", "roles": [{"names": ["sync"], "cues": ["wait", "barrier"]},
                                                 {"names": ["async"], "cues": ["stale", "waits"]}]}]}
    with pytest.raises(ValueError, match="share"):
        parse_roles(raw)


def test_two_implied_sides_are_refused() -> None:
    raw = {"questions": [{"id": "q_x", "roles": [{"names": ["sync"], "cues": ["wait"], "implied": True},
                                                 {"names": ["async"], "cues": ["stale"], "implied": True}]}]}
    with pytest.raises(ValueError, match="implied"):
        parse_roles(raw)


def test_numbers_in_the_authoring_data_are_read_as_words() -> None:
    raw = {"questions": [{"id": "q_x", "roles": [{"names": ["E4M3"], "cues": [448]},
                                                 {"names": ["E5M2"], "cues": [57344]}]}]}
    roles = parse_roles(raw)["q_x"]
    assert cues_swapped("E5M2 tops out at 448", roles) is not None


def test_one_side_is_refused() -> None:
    with pytest.raises(ValueError, match="two to"):
        parse_roles({"questions": [{"id": "q_x", "roles": [{"names": ["sync"], "cues": ["wait"]}]}]})


@pytest.mark.parametrize(("qid", "answer", "stated"), [
    (DP_MP, "DP replicates the model and splits the data; MP splits the model.", True),
    (DP_MP, "Data parallelism keeps the full model on every GPU, whereas model parallelism places different layers "
            "on different GPUs.", True),
    (DP_MP, "DP copies the model and splits data", False),  # one side
    (DP_MP, "Data parallelism splits the model; model parallelism splits the data", False),  # a swap
    (SYNC_ASYNC, "sync SGD waits at a barrier every step; async SGD does not wait", False),  # a denial: one side read
    (SYNC_ASYNC, "sync SGD waits at a barrier. async SGD also averages the gradients", False),  # one crossed
])
def test_an_answer_that_gives_every_side_its_own_words_and_none_another_states_the_roles(
        qid: str, answer: str, stated: bool) -> None:
    assert cues_stated(answer, authored_roles()[qid]) is stated
