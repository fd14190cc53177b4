"""The bank's contrast pairs: each near miss differs from a right answer in the one way its kind says."""

from __future__ import annotations

import random
from collections import Counter

from app.grading.rubric import GradingItem
from grading_lab.contrasts import bank_pairs, halves, keyword_list, negate, swap_roles, typo

SYNC = "Sync SGD waits for every worker before updating; async SGD lets each worker update without waiting"


def test_negation_denies_the_claim() -> None:
    rng = random.Random(1)
    out = {negate("Reduce-scatter leaves each rank with one chunk", rng) for _ in range(10)}
    assert all(o and o != "Reduce-scatter leaves each rank with one chunk" for o in out)
    assert negate("bf16 is safer than fp16", random.Random(2)) in {"bf16 is not safer than fp16"}


def test_a_swap_exchanges_the_two_roles_and_leaves_a_plain_conjunction_alone() -> None:
    assert swap_roles(SYNC) == ("async SGD waits for every worker before updating; sync SGD lets each worker "
                                "update without waiting")
    assert swap_roles("1F1B interleaves forward and backward passes") is None  # "A and B": no roles to swap


def test_keyword_lists_halves_and_typos() -> None:
    words = keyword_list("Activation checkpointing recomputes activations in the backward pass", random.Random(3))
    assert words is not None and ", " in words and " the " not in words
    assert halves("It shards the optimizer states, so each GPU holds less memory") == [
        "It shards the optimizer states", "each GPU holds less memory"]
    slipped = typo("DistributedSampler gives every rank a disjoint shard", random.Random(4))
    assert slipped != "DistributedSampler gives every rank a disjoint shard"


def test_pairs_are_balanced_and_fixed_for_a_seed() -> None:
    items = [
        GradingItem("What is sync vs async SGD?", [SYNC], ["They are the same"], key="q1"),
        GradingItem("What does all-gather do?", ["Every rank ends with the concatenation of all ranks' chunks"],
                    key="q2"),
    ]
    first, again = bank_pairs(items, seed=7), bank_pairs(items, seed=7)
    assert first == again
    labels = Counter(p.label for p in first)
    assert labels["correct"] >= 10 and labels["incorrect"] >= 10
    assert {p.kind for p in first} >= {"typo", "terse", "negation", "swapped_roles", "other_question", "hedge",
                                      "wrong_option", "keyword_list"}
    assert all(p.group in {"q1", "q2"} for p in first)
