"""The chat API: a quiz by chat, hints, why, skip, concept questions, demos, progress, and the SSE stream."""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi.testclient import TestClient

from app.chat.hints import reveals
from app.config import Settings
from app.db import make_engine, make_sessionmaker, transaction
from app.main import create_app
from app.models import Question
from tests.app.chat.fake_demos import FakeDemoRunner
from tests.conftest import ingest_with
from tests.fakes import FakeEncoder


class Learner:
    """A chat learner: the token and conversation the first message gives, used on every later one."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.token: str | None = None
        self.conversation: str | None = None

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def say(self, message: str) -> list[dict[str, Any]]:
        res = self.client.post(
            "/v1/chat", json={"message": message, "conversation_id": self.conversation}, headers=self.headers
        )
        assert res.status_code == 200, res.text
        body = res.json()
        self.token = self.token or body["token"]
        self.conversation = body["conversation_id"]
        return list(body["replies"])


def _question(client: TestClient, question_id: str) -> Question:
    settings = client.app.state.runtime.settings  # type: ignore[attr-defined]
    engine = make_engine(settings.db_url)
    try:
        with transaction(make_sessionmaker(engine)) as s:
            row = s.get(Question, question_id)
            assert row is not None
            return row
    finally:
        engine.dispose()


def _kinds(replies: list[dict[str, Any]]) -> list[str]:
    return [r["kind"] for r in replies]


def test_a_quiz_by_chat_with_hints_a_graded_answer_why_and_skip(chat: TestClient) -> None:
    learner = Learner(chat)
    first = learner.say("qiuz me on pipline parallelism")
    assert learner.token and learner.token.startswith("ct_")
    question = first[-1]
    assert question["kind"] == "question" and "Pipeline" in question["text"]
    row = _question(chat, question["question_id"])
    assert "pipeline-parallelism" in row.topics
    hint = learner.say("hnit pls")[0]
    assert hint["kind"] == "hint" and hint["citations"][0]["number"] == row.number
    assert not reveals(hint["text"], row.accepted_answers[0])
    # A known wrong option is graded exactly (and named as the misconception) whatever the encoder.
    answer = row.wrong_options[0] if row.wrong_options else "It makes the GPU fans spin faster"
    wrong = learner.say(answer)
    assert _kinds(wrong) == ["grade", "question"]
    grade = wrong[0]
    assert grade["data"]["verdict"] in ({"incorrect"} if row.wrong_options else {"incorrect", "partial"})
    assert grade["text"].startswith(("**Not quite", "**Partly"))
    if row.wrong_options:
        assert "misconception" in grade["text"]
    assert row.accepted_answers[0] in grade["text"] and "[1]" in grade["text"]
    assert grade["citations"][0]["file"] == row.document and grade["citations"][0]["number"] == row.number
    if row.explanation:
        assert row.explanation in grade["text"] and grade["citations"][1]["snippet"] == row.explanation
    why = learner.say("why was i wrong?")[0]
    assert why["kind"] == "explanation" and row.accepted_answers[0] in why["text"]
    assert all(f"[{c['n']}]" in why["text"] for c in why["citations"])
    skipped = learner.say("skp")
    assert _kinds(skipped)[0] == "grade" and skipped[0]["text"].startswith("**Skipped.**")
    assert skipped[0]["data"]["verdict"] == "incorrect" and skipped[-1]["kind"] == "question"


def test_multiple_choice_by_letter_and_harder_drops_the_options(chat: TestClient) -> None:
    learner = Learner(chat)
    question = learner.say("quiz me on pipeline parallelism")[-1]
    while not question["choices"]:
        question = learner.say("skip")[-1]
    row = _question(chat, question["question_id"])
    right = next(c["value"] for c in question["choices"] if c["label"].endswith(row.accepted_answers[0]))
    graded = learner.say(right)
    assert graded[0]["data"]["verdict"] == "correct" and graded[0]["text"].startswith("**Correct")
    harder = learner.say("give me something harder")
    assert harder[0]["kind"] == "info" and harder[-1]["kind"] == "question" and harder[-1]["choices"] == []


def test_concept_questions_are_answered_from_the_notes_with_citations_or_declined(chat: TestClient) -> None:
    learner = Learner(chat)
    answer = learner.say("what is reduce-scatter?")[0]
    assert answer["kind"] == "answer" and answer["citations"]
    for citation in answer["citations"]:
        assert citation["snippet"] in answer["text"] and f"[{citation['n']}]" in answer["text"]
        assert citation["file"].endswith(".md") and citation["section"] and citation["passage_id"]
    declined = learner.say("what is the best recipe for sourdough bread?")[0]
    assert declined["kind"] == "decline" and "notes don't cover" in declined["text"] and not declined["citations"]


def test_a_demo_runs_and_its_chart_comes_back_as_an_image(chat: TestClient, runner: FakeDemoRunner) -> None:
    learner = Learner(chat)
    replies = learner.say("run the all reduce demo")
    assert runner.started == [("allreduce", {})]
    assert _kinds(replies) == ["demo_started", "demo"]
    chart = replies[1]["chart"]
    assert chart["image"].startswith("data:image/svg+xml;base64,") and chart["series"][0]["name"] == "busbw_gbps"
    menu = learner.say("show me")[0]  # nothing in focus yet: offer the catalogue
    assert menu["kind"] == "demo_menu" and len(menu["choices"]) >= 8


def test_a_failed_demo_is_reported(chat: TestClient, runner: FakeDemoRunner) -> None:
    runner.fail.add("pipeline")
    replies = Learner(chat).say("run the pipeline demo")
    assert replies[-1]["kind"] == "demo_failed" and "died" in replies[-1]["text"]


def test_progress_after_answers(chat: TestClient) -> None:
    learner = Learner(chat)
    learner.say("quiz me on collectives")
    learner.say("skip")
    report = learner.say("how am I doing?")[0]
    assert report["kind"] == "progress" and "answered **1**" in report["text"]
    assert report["data"]["progress"]["answered"] == 1


def test_unknown_topic_and_help(chat: TestClient) -> None:
    learner = Learner(chat)
    declined = learner.say("quiz me on french cooking")[0]
    assert declined["kind"] == "decline" and "french cooking" in declined["text"] and declined["choices"]
    assert learner.say("hello")[0]["kind"] == "help"
    assert learner.say("hint")[0]["kind"] == "info"  # no question pending


def _events(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for frame in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in frame.split("\n"))
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_the_stream_sends_meta_replies_progress_and_done(chat: TestClient) -> None:
    res = chat.post("/v1/chat/stream", json={"message": "run the allreduce demo"})
    assert res.status_code == 200 and res.headers["content-type"].startswith("text/event-stream")
    events = _events(res.text)
    names = [name for name, _ in events]
    assert names[0] == "meta" and names[-1] == "done"
    assert names.count("progress") == 3 and names.count("reply") == 2
    meta = events[0][1]
    assert meta["token"].startswith("ct_")
    history = chat.get(
        f"/v1/chat/conversations/{meta['conversation_id']}", headers={"Authorization": f"Bearer {meta['token']}"}
    ).json()["messages"]
    assert [m["role"] for m in history] == ["learner", "tutor", "tutor"]
    assert history[-1]["reply"]["chart"]["image"].startswith("data:image/svg+xml;base64,")


def test_the_conversation_survives_and_continues(chat: TestClient) -> None:
    learner = Learner(chat)
    question = learner.say("quiz me")[-1]
    again = Learner(chat)
    again.token = learner.token  # a reload: same token, no conversation id -> the latest conversation
    still = again.say("quiz me")
    assert still[-1]["question_id"] == question["question_id"]
    assert again.conversation == learner.conversation
    new = chat.post("/v1/chat/conversations", headers=learner.headers)
    assert new.status_code == 201 and new.json()["id"] != learner.conversation and new.json()["token"] is None


def test_bad_requests(chat: TestClient) -> None:
    assert chat.post("/v1/chat", json={"message": "   "}).status_code == 422
    assert chat.post("/v1/chat", json={"message": "x" * 2001}).status_code == 422
    bad = chat.post("/v1/chat", json={"message": "hi"}, headers={"Authorization": "Bearer ct_nope"})
    assert bad.status_code == 401 and bad.json()["error"]["code"] == "unauthorized"
    assert chat.post("/v1/chat", json={"message": "hi"}, headers={"Authorization": "Basic x"}).status_code == 401
    assert chat.get("/v1/chat/conversations").status_code == 401


def test_without_a_fake_the_chat_uses_the_job_queue_and_says_when_no_worker_is_connected(
    settings: Settings, fake_encoder: FakeEncoder
) -> None:
    ingest_with(settings, fake_encoder)
    down = settings.model_copy(update={"worker_token": "t", "demo_queue_url": str(settings.data_dir / "queue.db")})
    app = create_app(down, lambda _: fake_encoder, load_in_background=False)
    with TestClient(app) as client:
        started = time.monotonic()
        reply = Learner(client).say("run the allreduce demo")[-1]
    assert reply["kind"] == "demo_failed" and "no demo worker is connected" in reply["text"]
    assert time.monotonic() - started < 5
