"""The ask path: study-note passages that answer a question, cited, or "the notes don't cover that";
the same path behind /v1/ask, the chat and the Slack bot; the relevance head's parts; frozen sets."""

from __future__ import annotations

import difflib
import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.answers import grounding
from app.ask import relevance
from app.ask.relevance import FEATURES, RelevanceError, Vocabulary, features, load_relevance, words
from app.ask.service import ask
from app.chat.replies import Choice, ask_reply
from app.config import Settings
from app.db import make_engine, make_sessionmaker, transaction
from app.main import create_app
from app.models import Passage
from app.slack.blocks import concept_message
from grading_lab.ask_eval import decide, figures, in_section, load_items, observe
from ingest.embedder import Encoder
from ingest.notes import parse_note
from tests.conftest import ROOT, ingest_with, normalised

EVAL_SHA256 = "1889ca60d5031304e1ef0a6033a05d82058cb2da2d7ccb15aebed5725fc7565c"
BLIND_SHA256 = "e19ca2395020cbf84bf1fa266504c4f1ee45b906a3bc06746f890e03e07c6286"


@pytest.fixture(scope="module")
def notes_app(tmp_path_factory: pytest.TempPathFactory, real_encoder: Encoder) -> Iterator[TestClient]:
    """The seeds and the project's notes, ingested with the real model, behind the app (SQLite)."""
    data = tmp_path_factory.mktemp("ask") / "data"
    shutil.copytree(ROOT / "data" / "raw", data / "raw")
    shutil.copytree(ROOT / "data" / "notes", data / "notes")
    for name in ("taxonomy.yaml", "annotations.yaml"):
        shutil.copy(ROOT / "data" / name, data / name)
    settings = Settings(data_dir=data, database_url=f"sqlite:///{data / 'tutor.db'}")
    summary = ingest_with(settings, real_encoder, [settings.raw_path, settings.notes_path])
    assert summary.skipped == [] and summary.passages > 0
    grounding.MATERIAL.clear()
    app = create_app(settings, lambda _: real_encoder, load_in_background=False)
    with TestClient(app) as client:
        yield client
    grounding.MATERIAL.clear()


def _ask(client: TestClient, text: str) -> dict[str, Any]:
    response = client.post("/v1/ask", json={"text": text})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# --- the relevance head's parts --------------------------------------------------------------------


def test_words_join_spellings_and_drop_filler() -> None:
    assert "allreduce" in words("all reduce") and "allreduce" in words("all-reduce")
    assert "gradient" in words("the gradients") and "what" not in words("what is it")


def test_a_misspelt_word_maps_to_the_material_and_an_unknown_one_does_not() -> None:
    vocab = Vocabulary.build(["pipeline parallelism splits the layers", "the bubble of a pipeline schedule"])
    assert vocab.canonical("pipline") == "pipeline"
    assert vocab.canonical("sourdough") is None
    assert vocab.canonical("bubl") is None  # short words are never matched loosely


def test_features_see_words_the_material_never_uses() -> None:
    vocab = Vocabulary.build(["ring all-reduce sends each byte twice", "tensor parallelism needs NVLink"])
    passage = "ring all-reduce sends each byte twice"
    known = features("why does ring all-reduce send each byte twice", [0.7, 0.4], [passage], vocab)
    unknown = features("how do I bake sourdough bread", [0.2, 0.1], ["tensor parallelism needs NVLink"], vocab)
    named = dict(zip(FEATURES, known, strict=True)), dict(zip(FEATURES, unknown, strict=True))
    assert named[0]["covered"] > 0.9 and named[0]["unknown"] == 0.0
    assert named[1]["covered"] == 0.0 and named[1]["unknown"] == 1.0


def test_the_heading_feature_reads_the_cited_sections_titles() -> None:
    """A question about what a section is titled gets the heading feature; the same words in its text only do not."""
    text = "the capacity factor caps the tokens an expert takes; ring attention is mentioned in passing"
    vocab = Vocabulary.build([text, "expert parallelism: capacity factor and load balancing"])
    titled = features("what is the capacity factor for", [0.6, 0.4], [text], vocab,
                      headings=["expert-parallelism Capacity factor and load balancing"])
    mentioned = features("how does ring attention work", [0.6, 0.4], [text], vocab,
                         headings=["expert-parallelism Capacity factor and load balancing"])
    heading = FEATURES.index("heading")
    assert titled[heading] > 0.5 and mentioned[heading] == 0.0
    assert features("what is the capacity factor for", [0.6], [text], vocab)[heading] == 0.0  # no headings given


def test_the_head_file_is_checked_at_load(tmp_path: Path) -> None:
    shipped = json.loads(relevance.RELEVANCE_PATH.read_text(encoding="utf-8"))
    assert load_relevance().version == shipped["head"]["version"]
    assert shipped["data"]["sha256"] == hashlib.sha256((ROOT / "data/train/ask_dev.jsonl").read_bytes()).hexdigest()
    damaged = tmp_path / "relevance.json"
    damaged.write_text("{not json", encoding="utf-8")
    with pytest.raises(RelevanceError):
        load_relevance(damaged)
    other = {**shipped, "head": {**shipped["head"], "features": ["top"]}}
    damaged.write_text(json.dumps(other), encoding="utf-8")
    with pytest.raises(RelevanceError, match="other features"):
        load_relevance(damaged)


def test_the_evaluation_sets_are_frozen() -> None:
    """The sets the grader and the ask path are evaluated on may never change (tuning uses others)."""
    assert hashlib.sha256((ROOT / "data/eval/ask.jsonl").read_bytes()).hexdigest() == EVAL_SHA256
    assert hashlib.sha256((ROOT / "data/eval/blind.jsonl").read_bytes()).hexdigest() == BLIND_SHA256
    for path in ("data/eval/ask.jsonl", "data/train/ask_dev.jsonl"):
        items = load_items(ROOT / path)
        assert sum(not i["answerable"] for i in items) >= 40 and sum(i["answerable"] for i in items) >= 84


NEAR_DUPLICATE = 0.75  # difflib's ratio from which two questions are one reworded



def test_the_written_ask_questions_name_real_sections_and_no_held_out_question() -> None:
    """data/train/ask_answerable.jsonl and ask_gaps.jsonl (data/train/README.md): well formed, every
    section they name exists, and none of their questions stands in the frozen or the tuning set,
    even reworded a little."""
    headings: dict[str, set[str]] = {}
    for path in sorted((ROOT / "data" / "notes").glob("*.md")):
        headings[path.name] = {h for p in parse_note(path).passages for h in p.heading_path}
    answerable = load_items(ROOT / "data/train/ask_answerable.jsonl")
    gaps = load_items(ROOT / "data/train/ask_gaps.jsonl")
    assert len(answerable) >= 200 and all(i["answerable"] for i in answerable)
    assert len(gaps) >= 200 and not any(i["answerable"] for i in gaps)
    assert {i["kind"] for i in gaps} == {"on_domain_gap", "off_domain"}
    for label in [s for i in answerable for s in i["sections"]] + [s for i in gaps for s in i["near"]]:
        note, _, heading = label.partition("#")
        assert heading in headings[note], label
    held = [normalised(i["question"]) for path in ("data/eval/ask.jsonl", "data/train/ask_dev.jsonl")
            for i in load_items(ROOT / path)]
    leaked = [i["question"] for i in answerable + gaps
              if difflib.get_close_matches(normalised(i["question"]), held, n=1, cutoff=NEAR_DUPLICATE)]
    assert not leaked, leaked[:3]


def test_a_set_line_without_its_label_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "what is a bubble?", "answerable": true}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="sections"):
        load_items(bad)


# --- the path, end to end with the real model ------------------------------------------------------


def test_a_covered_question_is_answered_from_the_notes_with_citations(notes_app: TestClient) -> None:
    body = _ask(notes_app, "why does tensor parallelism need fast interconnects like NVLink?")
    assert body["answered"] is True and 0.5 <= body["confidence"] <= 1.0
    top = body["passages"][0]
    assert top["text"] == body["text"]
    # the tensor-parallelism note explains it; the pipeline note's why-pipelines-span-slow-links may come first
    assert "tensor-parallelism.md" in {p["file"] for p in body["passages"]}
    assert top["source"]["section"] and top["lines"][0] <= top["lines"][1]
    assert all(p["kind"] == "notes" and p["id"].startswith("p_") for p in body["passages"])
    assert len(body["passages"]) == 3


def test_a_question_authored_for_a_section_finds_that_section_first(notes_app: TestClient) -> None:
    """A note's `asks` are index entries of their section: a learner who words a question as an
    author expected lands on that section, though its prose shares few of the question's words."""
    note = parse_note(ROOT / "data" / "notes" / "pipeline-parallelism.md")
    entry = next(a for a in note.asks if a.section == "The pipeline bubble")
    for question in entry.questions:
        body = _ask(notes_app, question)
        top = body["passages"][0] if body["answered"] else None
        assert top is not None and top["file"] == "pipeline-parallelism.md", (question, body["text"][:80])
        assert top["source"]["section"].endswith("The pipeline bubble"), (question, top["source"])


@pytest.mark.parametrize("text", ["how do I bake sourdough bread", "what is the horovod timeline and how do i read it"])
def test_what_the_notes_do_not_cover_is_declined_with_the_nearest_topics(notes_app: TestClient, text: str) -> None:
    body = _ask(notes_app, text)
    assert body["answered"] is False and body["passages"] == []
    assert body["text"].startswith("The notes don't cover that")
    names = [t["name"] for t in body["nearest_topics"]]
    assert names and all(name in body["text"] for name in names)
    assert all(t["id"] != t["name"] for t in body["nearest_topics"])  # named from the taxonomy


def test_the_evaluation_code_decides_exactly_as_the_service(notes_app: TestClient, real_encoder: Encoder) -> None:
    items = load_items(ROOT / "data/train/ask_dev.jsonl")[::10]
    runtime = notes_app.app.state.runtime  # type: ignore[attr-defined]
    engine = make_engine(runtime.settings.db_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            _, index = runtime.require()
            observations = observe(session, real_encoder, index, items)
            decided = decide(load_relevance(), observations)
            served = [ask(session, real_encoder, index, it["question"])["answered"] for it in items]
    finally:
        engine.dispose()
    assert decided == served
    f = figures(observations, decided)
    assert f["questions"] == len(items) and 0.0 <= f["recall_at_3"] <= 1.0


def test_in_section_matches_any_depth_of_the_heading_path() -> None:
    heads = ["Activation checkpointing", "How much it saves and what it costs"]
    passage = Passage(note="memory.md", heading_path=heads)
    assert in_section(passage, "memory.md#How much it saves and what it costs")
    assert in_section(passage, "memory.md#Activation checkpointing")
    assert not in_section(passage, "zero-fsdp.md#Activation checkpointing")


# --- chat and Slack use the same path ---------------------------------------------------------------


def test_the_chat_answers_a_concept_from_the_notes_and_links_the_passages(notes_app: TestClient) -> None:
    reply = notes_app.post("/v1/chat", json={"message": "what does DistributedSampler set_epoch do?"}).json()
    answer = reply["replies"][0]
    assert answer["kind"] == "answer"
    assert answer["citations"] and all(c["passage_id"] and c["file"].endswith(".md") for c in answer["citations"])
    assert "data-parallelism.md" in {c["file"] for c in answer["citations"]}


def test_the_chat_declines_and_offers_the_nearest_topics_first() -> None:
    result = {"answered": False, "text": "The notes don't cover that.", "passages": [],
              "nearest_topics": [{"id": "memory", "name": "Memory"}]}
    choices = [Choice(label=n, value=f"quiz me on {n}") for n in ("Collectives", "Memory", "Scaling")]
    reply = ask_reply(result, choices)
    assert reply.kind == "decline" and reply.choices[0].label == "Memory" and len(reply.choices) == 3


def test_slack_cites_the_note_sections(notes_app: TestClient) -> None:
    body = _ask(notes_app, "what is a pipeline bubble?")
    message = concept_message("what is a pipeline bubble?", body)
    text = json.dumps(message["blocks"])
    assert "pipeline-parallelism.md" in text and "From the study notes" in text
    declined = concept_message("best pizza?", _ask(notes_app, "best pizza in naples?"))
    assert "notes don't cover" in declined["text"]


def test_feature_vector_has_the_heads_shape() -> None:
    vocab = Vocabulary.build(["x"])
    assert features("anything", [], [], vocab).shape == (len(FEATURES),)
    assert np.isfinite(features("", [0.1], ["x"], vocab)).all()


def test_a_damaged_relevance_head_makes_the_service_not_ready(
    settings: Settings, fake_encoder: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    damaged = tmp_path / "relevance.json"
    damaged.write_text('{"head": {"features": ["top"]}}', encoding="utf-8")
    monkeypatch.setattr(relevance, "RELEVANCE_PATH", damaged)
    relevance.default_relevance.cache_clear()
    try:
        ingest_with(settings, fake_encoder)
        with TestClient(create_app(settings, lambda _: fake_encoder, load_in_background=False)) as client:
            ready = client.get("/readyz")
            assert ready.status_code == 503 and "relevance head" in ready.json()["error"]["message"]
            assert str(tmp_path) not in ready.text
    finally:
        relevance.default_relevance.cache_clear()
