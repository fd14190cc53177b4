"""Grounded explanations: a question's own explanation and the study-note passages that explain it,
never another question's material; in the grading API, quiz answers, chat replies and Slack blocks."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.answers import grounding
from app.chat.replies import grade_reply
from app.config import Settings
from app.db import make_engine, make_sessionmaker, transaction
from app.keys.service import create_key
from app.main import create_app
from app.models import Question
from app.slack.blocks import verdict_message
from tests.conftest import ROOT, ingest_with
from tests.fakes import FakeEncoder

SAMPLER_SECTION = "Splitting the data with DistributedSampler"


@pytest.fixture
def notes_client(settings: Settings, fake_encoder: FakeEncoder) -> Iterator[TestClient]:
    """A client of an app whose bank holds the seeds and the project's study notes."""
    shutil.copytree(ROOT / "data" / "notes", settings.notes_path)
    summary = ingest_with(settings, fake_encoder, [settings.raw_path, settings.notes_path])
    assert summary.skipped == [] and summary.passages > 0
    grounding.MATERIAL.clear()
    app = create_app(settings, lambda _: fake_encoder, load_in_background=False)
    with TestClient(app) as c:
        yield c
    grounding.MATERIAL.clear()


def _bank(client: TestClient) -> dict[tuple[str, int], Question]:
    settings = client.app.state.runtime.settings  # type: ignore[attr-defined]
    engine = make_engine(settings.db_url)
    with transaction(make_sessionmaker(engine)) as s:
        rows = {(q.document, q.number): q for q in s.scalars(select(Question))}
    engine.dispose()
    return rows


def _q(bank: dict[tuple[str, int], Question], prefix: str, number: int) -> Question:
    return next(q for (doc, n), q in bank.items() if doc.startswith(prefix) and n == number)


def _key(client: TestClient) -> str:
    settings = client.app.state.runtime.settings  # type: ignore[attr-defined]
    engine = make_engine(settings.db_url)
    with transaction(make_sessionmaker(engine)) as s:
        _, secret = create_key(s, name="test", scopes=("grade",))
    engine.dispose()
    return secret


def _grade(client: TestClient, question_id: str, answer: str = "each rank gets a disjoint slice") -> dict[str, Any]:
    res = client.post("/v1/grade", json={"question_id": question_id, "answer": answer},
                      headers={"X-API-Key": _key(client)})
    assert res.status_code == 200, res.text
    return dict(res.json())


def _assert_not_other_questions(explanation: dict[str, Any], bank: dict[tuple[str, int], Question], qid: str) -> None:
    """Nothing in the explanation is another question's material."""
    assert "question_id" not in explanation and "question" not in explanation
    others = {q.explanation for q in bank.values() if q.id != qid and q.explanation}
    texts = [explanation["text"], *(p["text"] for p in explanation["passages"])]
    assert not any(t in others for t in texts)
    if explanation["source"]:
        assert explanation["source"]["file"].endswith(".md") or explanation["source"]["number"] is not None


def test_explanation_for_gives_own_text_and_linked_passages(settings: Settings, fake_encoder: FakeEncoder) -> None:


    shutil.copytree(ROOT / "data" / "notes", settings.notes_path)
    ingest_with(settings, fake_encoder, [settings.raw_path, settings.notes_path])
    engine = make_engine(settings.db_url)
    with transaction(make_sessionmaker(engine)) as s:
        rows = {(q.document[:3], q.number): q for q in s.scalars(select(Question))}
        q5 = grounding.explanation_for(s, rows["003", 5])
        q3 = grounding.explanation_for(s, rows["000", 3])
    engine.dispose()
    assert q5["kind"] == "notes" and q5["source"]["section"] == SAMPLER_SECTION
    assert [p["heading_path"][0] for p in q5["passages"]] == [SAMPLER_SECTION] * len(q5["passages"])
    assert q5["text"] == "\n\n".join(p["text"] for p in q5["passages"])
    assert q3["kind"] == "own" and q3["text"] == rows["000", 3].explanation and q3["passages"]


def test_grading_003_q5_cites_its_note_passages_not_another_question(notes_client: TestClient) -> None:
    bank = _bank(notes_client)
    q5 = _q(bank, "003", 5)
    assert q5.explanation is None and "DistributedSampler" in q5.text
    result = _grade(notes_client, q5.id)
    explanation = result["explanation"]
    assert explanation["kind"] == "notes"
    assert {"kind", "text", "source", "note", "passages"} <= set(explanation)
    assert "no explanation of its own" in explanation["note"]
    assert explanation["source"]["file"] == "data-parallelism.md"
    assert explanation["source"]["section"] == SAMPLER_SECTION
    assert explanation["source"]["number"] is None
    passages = explanation["passages"]
    assert passages and all(p["kind"] == "notes" for p in passages)
    for p in passages:
        assert p["file"] == "data-parallelism.md" and p["note_title"] == "Data parallelism"
        assert p["heading_path"][0] == SAMPLER_SECTION
        assert p["lines"][0] <= p["lines"][1]
    assert explanation["source"]["lines"] == [passages[0]["lines"][0], passages[-1]["lines"][1]]
    assert "set_epoch" in explanation["text"] and "drop_last" in explanation["text"]
    assert any(ref["id"] == "pytorch-data-docs" for p in passages for ref in p["references"])
    # the lines cited are the note's lines
    note = (ROOT / "data" / "notes" / "data-parallelism.md").read_text(encoding="utf-8").splitlines()
    first = passages[0]
    assert note[first["lines"][0] - 1] == first["text"].splitlines()[0]
    _assert_not_other_questions(explanation, bank, q5.id)


def test_a_question_with_its_own_explanation_keeps_it_and_gets_its_passages(notes_client: TestClient) -> None:
    bank = _bank(notes_client)
    q3 = _q(bank, "000", 3)  # explained by "How DistributedDataParallel synchronizes gradients"
    assert q3.explanation
    explanation = _grade(notes_client, q3.id)["explanation"]
    assert explanation["kind"] == "own" and explanation["text"] == q3.explanation
    assert explanation["source"] == {"file": q3.document, "number": 3, "lines": [q3.line_start, q3.line_end]}
    assert explanation["note"] is None
    assert explanation["passages"]
    assert {p["heading_path"][0] for p in explanation["passages"]} == {
        "How DistributedDataParallel synchronizes gradients"
    }


def test_every_question_is_explained_and_none_by_another_question(notes_client: TestClient) -> None:
    bank = _bank(notes_client)
    secret = _key(notes_client)
    for q in bank.values():
        res = notes_client.post("/v1/grade", json={"question_id": q.id, "answer": "no idea"},
                                headers={"X-API-Key": secret})
        explanation = res.json()["explanation"]
        assert explanation["kind"] == ("own" if q.explanation else "notes"), (q.document, q.number)
        assert explanation["passages"], (q.document, q.number)
        _assert_not_other_questions(explanation, bank, q.id)


def test_a_quiz_answer_to_003_q5_cites_note_passages(notes_client: TestClient) -> None:
    bank = _bank(notes_client)
    q5 = _q(bank, "003", 5)
    learner = notes_client.post("/v1/learners", json={}).json()["id"]
    res = notes_client.post("/v1/sessions", json={"learner_id": learner, "topics": q5.topics,
                                                  "length": 20, "mode": "new"})
    assert res.status_code == 201, res.text
    sid = res.json()["id"]
    for _ in range(20):
        nxt = notes_client.get(f"/v1/sessions/{sid}/next").json()
        assert nxt["done"] is False, "003 Q5 was never served"
        qid = nxt["question"]["id"]
        result = notes_client.post(f"/v1/sessions/{sid}/answers",
                                   json={"question_id": qid, "answer": "every rank gets its own shard"}).json()
        if qid == q5.id:
            break
    explanation = result["explanation"]
    assert explanation["kind"] == "notes" and explanation["source"]["file"] == "data-parallelism.md"
    assert all(p["heading_path"][0] == SAMPLER_SECTION for p in explanation["passages"])
    _assert_not_other_questions(explanation, bank, q5.id)
    # the chat's rendering of the stored result cites the note by section and lines, with no question number
    reply = grade_reply(result, q5.text)
    why = next(c for c in reply.citations if c.n == 2)
    assert (why.file, why.number, why.section) == ("data-parallelism.md", None, SAMPLER_SECTION)
    assert "**Why:**" in reply.text and "set_epoch" in reply.text
    # and Slack's
    message = verdict_message({**result, "attempt_id": "a_1"}, user_id="U1", can_continue=False)
    context = " ".join(str(b) for b in message["blocks"])
    assert "data-parallelism.md · " + SAMPLER_SECTION in context


def test_without_notes_a_question_without_explanation_gets_none(client: TestClient) -> None:
    bank = _bank(client)
    q5 = _q(bank, "003", 5)
    grounding.MATERIAL.clear()
    explanation = _grade(client, q5.id)["explanation"]
    assert explanation == {
        "kind": "none", "text": None, "source": None,
        "note": "No explanation is available for this question.", "passages": [],
    }


def test_chat_and_slack_show_the_first_passage_beside_an_own_explanation() -> None:
    passage = {
        "kind": "notes", "id": "p_1", "text": "DDP all-reduces gradients in buckets.", "note_title": "Data parallelism",
        "heading_path": ["How DDP works"], "file": "data-parallelism.md", "lines": [75, 75], "references": [],
    }
    result = {
        "question_id": "q_1", "verdict": "partial", "score": 0.5, "feedback": "Partly.", "covered_ideas": [],
        "missing_ideas": [], "misconception": None, "accepted_answer": "It all-reduces gradients",
        "citation": {"file": "000.txt", "number": 3, "lines": [10, 12]}, "caveats": [], "related_demos": [],
        "attempt_id": "a_1",
        "explanation": {"kind": "own", "text": "Gradients are averaged.", "note": None,
                        "source": {"file": "000.txt", "number": 3, "lines": [10, 12]}, "passages": [passage]},
    }
    reply = grade_reply(result, "What does DDP do?")
    assert [(c.n, c.file, c.number, c.section) for c in reply.citations] == [
        (1, "000.txt", 3, None), (2, "000.txt", 3, None), (3, "data-parallelism.md", None, "How DDP works")
    ]
    assert "**From the notes** (How DDP works): DDP all-reduces gradients in buckets. [3]" in reply.text
    blocks = " ".join(str(b) for b in verdict_message(result, user_id="U1", can_continue=False)["blocks"])
    assert "000.txt · Q3 · lines 10–12" in blocks
    assert "data-parallelism.md · How DDP works · lines 75–75" in blocks
    assert "From the notes" in blocks


@pytest.mark.parametrize(("verdict", "shown"), [("partial", True), ("incorrect", False)])
def test_only_an_answer_not_graded_incorrect_is_told_what_it_got(verdict: str, shown: bool) -> None:
    """An incorrect answer is wrong as a whole: a swap has the right words in the wrong places, and its
    "what you got" would name the very idea it reverses."""
    result = {
        "question_id": "q_1", "verdict": verdict, "score": 0.0, "feedback": "Not quite.",
        "covered_ideas": ["Data parallelism replicates the model"], "missing_ideas": ["model parallelism splits it"],
        "misconception": None, "accepted_answer": "DP replicates the model; MP splits it",
        "citation": {"file": "003.txt", "number": 1, "lines": [1, 2]}, "caveats": [], "related_demos": [],
        "attempt_id": "a_1", "explanation": {"kind": "own", "text": "Two ways to split work.", "note": None,
                                             "source": {"file": "003.txt", "number": 1, "lines": [1, 2]},
                                             "passages": []},
    }
    text = grade_reply(result, "What is the difference between DP and MP?").text
    assert ("What you got: Data parallelism replicates the model" in text) is shown, text
    assert "What was missing: model parallelism splits it" in text
