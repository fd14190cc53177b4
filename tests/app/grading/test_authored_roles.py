"""Authored roles (data/roles.yaml): swaps written in other words than the accepted answer's."""

from __future__ import annotations

import pytest

from app.grading.roles import authored_roles, cues_swapped, parse_roles
from grading_lab.evaluation import bank_items

SYNC_ASYNC = "q_c404f730f66d"
DP_DDP = "q_519f2c2810fc"
FAST_SLOW = "q_95bb719cc191"


@pytest.mark.parametrize(("qid", "answer", "said_of", "belongs_to"), [
    (SYNC_ASYNC, "sync SGD: workers push updates whenever they finish; async SGD: everybody waits", "sync SGD",
     "async SGD"),
    (SYNC_ASYNC, "in asynchronous sgd the workers meet at a barrier every step", "async SGD", "sync SGD"),
    (DP_DDP, "DDP keeps all GPUs in one multithreaded process, and DataParallel uses multiple processes", "DDP",
     "DataParallel"),
    (FAST_SLOW, "bounded staleness has the slow workers blocked until the fast ones are done", "slow workers",
     "fast workers"),
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


def test_every_authored_question_is_in_the_bank() -> None:
    keys = {item.key for item in bank_items().values()}
    assert set(authored_roles()) <= keys
    assert len(authored_roles()) >= 5


def test_a_cue_shared_by_two_sides_is_refused() -> None:
    raw = {"questions": [{"id": "q_x", "roles": [{"names": ["sync"], "cues": ["wait", "barrier"]},
                                                 {"names": ["async"], "cues": ["stale", "waits"]}]}]}
    with pytest.raises(ValueError, match="share"):
        parse_roles(raw)


def test_one_side_is_refused() -> None:
    with pytest.raises(ValueError, match="two or more"):
        parse_roles({"questions": [{"id": "q_x", "roles": [{"names": ["sync"], "cues": ["wait"]}]}]})
