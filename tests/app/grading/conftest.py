"""Fixtures for the grading tests: the fake encoder, and the real model loaded once per session."""

from __future__ import annotations

import pytest

from app.grading import GradingItem
from tests.fakes import FakeEncoder


@pytest.fixture
def fake() -> FakeEncoder:
    """A fresh fake encoder whose calls can be counted."""
    return FakeEncoder()


@pytest.fixture(scope="session")
def real_encoder():  # type: ignore[no-untyped-def]
    """The real sentence-transformers model, loaded once for all slow tests."""
    from ingest.embedder import SentenceTransformerEncoder

    return SentenceTransformerEncoder()


@pytest.fixture
def dp_item() -> GradingItem:
    """A two-sided question with wrong options shown as multiple choice."""
    return GradingItem(
        question="What is the difference between data parallelism and model parallelism?",
        reference_answers=[
            "Data parallelism replicates the model and splits data; "
            "model parallelism splits the model across devices"
        ],
        wrong_answers=[
            "Data parallelism splits the model; model parallelism splits the data",
            "They are identical when using gradient checkpointing",
            "Model parallelism is only useful for RNN architectures",
        ],
        options=[
            "They are identical when using gradient checkpointing",
            "Data parallelism replicates the model and splits data; "
            "model parallelism splits the model across devices",
            "Data parallelism splits the model; model parallelism splits the data",
            "Model parallelism is only useful for RNN architectures",
        ],
        key="test#1",
    )


@pytest.fixture
def ckpt_item() -> GradingItem:
    """A question with an explanation and no wrong options."""
    return GradingItem(
        question="What problem does activation recomputation (gradient checkpointing) solve?",
        reference_answers=[
            "It reduces GPU memory usage by recomputing activations during the backward pass "
            "instead of storing them"
        ],
        explanation="Gradient checkpointing trades compute for memory by discarding intermediate "
        "activations and recomputing them during backpropagation.",
    )
