"""Ingestion into both databases: counts, idempotence, updates, retirement, bad documents."""

from __future__ import annotations

import hashlib
from pathlib import Path

from sqlalchemy import select

from app.config import Settings
from app.db import make_engine, make_sessionmaker, transaction
from app.models import ACTIVE, RETIRED, BankState, Question
from ingest.index import load_index
from tests.conftest import ingest_with
from tests.fakes import FakeEncoder


def _rows(settings: Settings) -> dict[str, tuple[str, str, str]]:
    engine = make_engine(settings.db_url)
    with transaction(make_sessionmaker(engine)) as session:
        rows = {q.id: (q.status, q.content_hash, q.concept_id) for q in session.scalars(select(Question))}
    engine.dispose()
    return rows


def _index_digest(settings: Settings) -> dict[str, str]:
    return {
        str(p.relative_to(settings.index_path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(settings.index_path.rglob("*"))
        if p.is_file()
    }


def test_seeds_give_42_questions(settings: Settings, fake_encoder: FakeEncoder) -> None:
    summary = ingest_with(settings, fake_encoder)
    assert (summary.questions, summary.added, summary.retired) == (42, 42, 0)
    assert summary.skipped == []
    rows = _rows(settings)
    assert len(rows) == 42 and all(r[0] == ACTIVE for r in rows.values())
    engine = make_engine(settings.db_url)
    with transaction(make_sessionmaker(engine)) as session:
        q = session.scalars(select(Question).where(Question.document.like("003%"), Question.number == 4)).one()
        state = session.get(BankState, "index_version")
    engine.dispose()
    assert q.topics == ["pipeline-parallelism"]
    assert any("interleaved" in n for n in q.notes)  # the author's caveat is attached
    assert state is not None
    index = load_index(settings.index_path, state.value, fake_encoder.model_id, fake_encoder.dim)
    assert {e.kind for e in index.entries} == {"question", "answer", "explanation"}
    assert len({e.question_id for e in index.entries}) == 42


def test_second_run_embeds_nothing_and_keeps_index_bytes(settings: Settings, fake_encoder: FakeEncoder) -> None:
    first = ingest_with(settings, fake_encoder)
    before_rows, before_index = _rows(settings), _index_digest(settings)
    calls = len(fake_encoder.calls)
    second = ingest_with(settings, fake_encoder)
    assert first.embedded > 0 and second.embedded == 0
    assert (second.added, second.updated, second.unchanged, second.retired) == (0, 0, 42, 0)
    assert len(fake_encoder.calls) == calls  # the encoder was not even asked
    assert _rows(settings) == before_rows
    assert _index_digest(settings) == before_index


def test_changed_question_reembeds_only_that_question(settings: Settings, fake_encoder: FakeEncoder) -> None:
    ingest_with(settings, fake_encoder)
    path = settings.raw_path / "002_1f1c560eb3b82a3f.txt"
    path.write_text(
        path.read_text(encoding="utf-8").replace(
            "Data parallelism + tensor parallelism + pipeline parallelism",
            "Data, tensor and pipeline parallelism combined",
        ),
        encoding="utf-8",
    )
    seen = len(fake_encoder.texts)
    summary = ingest_with(settings, fake_encoder)
    assert (summary.added, summary.updated, summary.unchanged, summary.retired) == (0, 1, 41, 0)
    new_texts = fake_encoder.texts[seen:]
    assert summary.embedded == len(new_texts) >= 1
    # only the new answer and the key ideas drawn from it were embedded
    assert all(t.lower() in "data, tensor and pipeline parallelism combined" for t in new_texts), new_texts


def test_ids_are_stable_and_independent_of_order(settings: Settings, fake_encoder: FakeEncoder) -> None:
    ingest_with(settings, fake_encoder)
    ids = set(_rows(settings))
    path = settings.raw_path / "001_d277a1055194c29d.txt"
    blocks = path.read_text(encoding="utf-8").split("\nQuestion ")
    head, questions = blocks[0], blocks[1:]
    path.write_text("\nQuestion ".join([head, *reversed(questions)]), encoding="utf-8")
    summary = ingest_with(settings, fake_encoder)
    assert set(_rows(settings)) == ids
    assert summary.added == 0 and summary.retired == 0
    assert summary.updated > 0  # positions changed, so citations were updated


def test_removed_question_is_retired_not_deleted(settings: Settings, fake_encoder: FakeEncoder) -> None:
    ingest_with(settings, fake_encoder)
    path = settings.raw_path / "003_28df717c268ee6dd.txt"
    text = path.read_text(encoding="utf-8")
    start, end = text.index("Question 25\n"), text.index("Test yourself")
    path.write_text(text[:start] + text[end:], encoding="utf-8")
    summary = ingest_with(settings, fake_encoder)
    assert (summary.questions, summary.retired) == (41, 1)
    rows = _rows(settings)
    assert len(rows) == 42 and sum(r[0] == RETIRED for r in rows.values()) == 1


def test_deleted_document_retires_its_questions(settings: Settings, fake_encoder: FakeEncoder) -> None:
    ingest_with(settings, fake_encoder)
    (settings.raw_path / "001_d277a1055194c29d.txt").unlink()
    summary = ingest_with(settings, fake_encoder)
    assert (summary.questions, summary.retired) == (37, 5)


def test_ingesting_one_file_leaves_the_rest_alone(
    settings: Settings, fake_encoder: FakeEncoder, tmp_path: Path
) -> None:
    ingest_with(settings, fake_encoder)
    extra = tmp_path / "mine.yaml"
    extra.write_text("questions:\n  - question: What is NVSwitch?\n    accepted_answers: [A switch chip]\n")
    summary = ingest_with(settings, fake_encoder, [extra])
    assert (summary.questions, summary.added, summary.retired) == (43, 1, 0)


def test_malformed_documents_leave_bank_untouched(
    settings: Settings, fake_encoder: FakeEncoder, tmp_path: Path
) -> None:
    ingest_with(settings, fake_encoder)
    before_rows, before_index = _rows(settings), _index_digest(settings)
    (settings.raw_path / "003_28df717c268ee6dd.txt").write_bytes(b"\x00\x01binary junk")
    (settings.raw_path / "empty.txt").write_text("")
    (settings.raw_path / "notes.txt").write_text("Just some notes.\n")
    with open(settings.raw_path / "huge.txt", "wb") as fh:
        fh.truncate(50 * 1024 * 1024)
    summary = ingest_with(settings, fake_encoder)
    reasons = {i.file: i.reason for i in summary.skipped}
    assert set(reasons) == {"003_28df717c268ee6dd.txt", "empty.txt", "notes.txt", "huge.txt"}
    assert "binary" in reasons["003_28df717c268ee6dd.txt"]
    assert summary.retired == 0 and summary.questions == 42
    assert _rows(settings) == before_rows
    assert _index_digest(settings) == before_index


def test_question_without_answer_is_skipped_and_reported(settings: Settings, fake_encoder: FakeEncoder) -> None:
    path = settings.raw_path / "000_78b4b506bc754b1f.txt"
    text = path.read_text(encoding="utf-8")
    text = text.replace(" (Correct answer)", "", 1).replace(
        "Correct answer: A smaller batch processed by a single GPU layer to keep all pipeline stages busy\n", ""
    )
    path.write_text(text, encoding="utf-8")
    summary = ingest_with(settings, fake_encoder)
    assert summary.questions == 41
    assert [i.as_dict() for i in summary.skipped] == [
        {"file": "000_78b4b506bc754b1f.txt", "line": 2, "reason": "question 1 has no accepted answer"}
    ]


def test_question_that_loses_its_answer_keeps_its_previous_version(
    settings: Settings, fake_encoder: FakeEncoder
) -> None:
    ingest_with(settings, fake_encoder)
    before = _rows(settings)
    path = settings.raw_path / "001_d277a1055194c29d.txt"
    path.write_text(
        path.read_text(encoding="utf-8").replace("Accepted Answer\n\nTensor parallelism for inference\n\n", ""),
        encoding="utf-8",
    )
    summary = ingest_with(settings, fake_encoder)
    assert summary.retired == 0 and summary.questions == 42
    assert len(summary.skipped) == 1 and summary.skipped[0].line == 15
    after = _rows(settings)
    assert set(after) == set(before)
    tp_inference = "q_09338f3d87f6"  # 001 Q2, the one that lost its accepted answer
    assert after[tp_inference] == before[tp_inference]  # previous version still served
    assert summary.updated == 3  # the later questions moved up: their citations changed
