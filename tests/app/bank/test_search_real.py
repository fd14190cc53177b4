"""Semantic search with the real model: paraphrased queries find the question they are about."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session

from app.bank.search import search
from app.config import Settings
from app.db import make_engine, make_sessionmaker
from app.models import BankState
from ingest.embedder import Encoder
from ingest.index import LoadedIndex, load_index
from tests.conftest import ingest_with

pytestmark = pytest.mark.slow

# (query written in other words, the file and number of the question it is about)
PARAPHRASES = [
    ("why would you cut a minibatch into smaller chunks when stages run one after another", "000", 1),
    ("gpus sitting idle at the start and end of a pipelined step", "000", 2),
    ("which lookup service lets workers on different machines discover each other when a job launches", "000", 5),
    ("can one GPU read another GPU's memory directly without going through the host", "000", 6),
    ("a network card writing straight into GPU memory on another server", "001", 4),
    ("recompute intermediate results in the backward pass to save memory", "002", 2),
    ("each GPU holds only some of the experts of a mixture model", "002", 1),
    ("why should every rank call set_epoch on the sampler that splits the dataset", "003", 5),
    ("how much compute and data should a language model get: tokens per parameter", "003", 15),
    ("how do you save and reload the weights of a fully sharded model", "003", 16),
]


@pytest.fixture(scope="module")
def bank(tmp_path_factory: pytest.TempPathFactory, real_encoder: Encoder) -> tuple[Session, LoadedIndex]:
    import shutil

    from tests.conftest import ROOT, SEEDS

    data = tmp_path_factory.mktemp("search") / "data"
    shutil.copytree(SEEDS, data / "raw")
    for name in ("taxonomy.yaml", "annotations.yaml"):
        shutil.copy(ROOT / "data" / name, data / name)
    settings = Settings(data_dir=data)
    ingest_with(settings, real_encoder)
    session = make_sessionmaker(make_engine(settings.db_url))()
    state = session.get(BankState, "index_version")
    assert state is not None
    return session, load_index(settings.index_path, state.value, real_encoder.model_id, real_encoder.dim)


def test_zero_query_ranks_a_zero_question_first(bank: tuple[Session, LoadedIndex], real_encoder: Encoder) -> None:
    session, index = bank
    hits = search(session, real_encoder, index, "what does the zero redundancy optimizer shard", k=3)
    assert "zero-fsdp" in hits[0].question.topics
    assert "ZeRO" in hits[0].question.text


def test_paraphrased_queries_find_their_question(bank: tuple[Session, LoadedIndex], real_encoder: Encoder) -> None:
    session, index = bank
    found = []
    for query, file, number in PARAPHRASES:
        top = search(session, real_encoder, index, query, k=1)[0].question
        found.append((top.document.startswith(file) and top.number == number, query, top.text))
    misses = [f"{q!r} -> {t!r}" for ok, q, t in found if not ok]
    assert len({(f, n) for _, f, n in PARAPHRASES}) == 10
    assert sum(ok for ok, _, _ in found) >= 9, misses


def test_near_duplicates_are_linked_as_one_concept(bank: tuple[Session, LoadedIndex]) -> None:
    from sqlalchemy import select

    from app.models import Question

    session, _ = bank
    groups: dict[str, list[str]] = {}
    for q in session.scalars(select(Question)):
        groups.setdefault(q.concept_id, []).append(f"{q.document[:3]}:{q.number}")
    linked = sorted(sorted(g) for g in groups.values() if len(g) > 1)
    assert ["001:1", "003:2"] in linked  # ZeRO
    assert ["002:1", "003:11"] in linked  # expert parallelism
    assert ["002:4", "003:18"] in linked  # ring all-reduce
    assert len(groups) >= 37  # linked, not merged wholesale; every question is still there
