"""The bank's contrast pairs: each near miss differs from a right answer in the one way its kind says."""

from __future__ import annotations

import random
from collections import Counter

from app.grading.rubric import GradingItem
from grading_lab.contrasts import (
    bank_pairs,
    evasion_pairs,
    halves,
    keyword_list,
    negate,
    question_subject,
    swap_roles,
    typo,
)

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


def test_the_subject_of_a_question_is_its_quoted_term_or_what_it_asks_about() -> None:
    assert question_subject("In pipeline parallelism, what is a 'micro-batch' used for?") == "micro-batch"
    assert question_subject("In NVIDIA's Megatron-LM framework, what is referred to as '3D parallelism'?") == (
        "3D parallelism")  # the apostrophe of "NVIDIA's" opens no quote
    assert question_subject("What is the difference between data parallelism and model parallelism?") == (
        "the difference between data parallelism and model parallelism")
    assert question_subject("What is NCCL and why is it preferred over Gloo for GPU training?") == "NCCL"
    assert question_subject("How does DistributedSampler ensure non-overlapping data across GPUs?") == (
        "DistributedSampler")
    assert question_subject("What NVIDIA GPU feature enables peer-to-peer memory access between GPUs?") == (
        "peer-to-peer memory access between GPUs")
    assert question_subject("When training on InfiniBand, which software layer sits below NCCL?") == (
        "training on InfiniBand")
    assert question_subject("What is?") is None


def test_evasions_name_the_subject_and_claim_nothing_of_the_answer() -> None:
    item = GradingItem("How does DistributedSampler ensure non-overlapping data across GPUs?",
                       ["It gives each rank a disjoint stride of the indices", "Each rank reads its own shard"],
                       key="q5")
    pairs = evasion_pairs([item], seed=3)
    assert pairs == evasion_pairs([item], seed=3)
    evasions = [p for p in pairs if p.kind == "evasion"]
    rights = [p for p in pairs if p.kind == "subject_then_answer"]
    assert len(evasions) == 4 and len(rights) == 2  # two evasions and one right answer per accepted answer
    assert all(p.label == "incorrect" and "DistributedSampler" in p.answer for p in evasions)
    answer_words = {"disjoint", "stride", "indices", "shard", "reads"}
    assert not any(answer_words & set(p.answer.lower().split()) for p in evasions)
    assert [p.answer for p in rights] == ["DistributedSampler: it gives each rank a disjoint stride of the indices",
                                          "DistributedSampler: each rank reads its own shard"]
    assert all(p.label == "correct" and p.group == "q5" for p in rights)
