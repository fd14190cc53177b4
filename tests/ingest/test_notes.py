"""Study notes as a document type: parsing, malformed notes, storage, index entries, re-embedding,
retirement, links to the questions they explain, and the project's real notes."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from sqlalchemy import select

from app.config import Settings
from app.db import make_engine, make_sessionmaker, transaction
from app.models import ACTIVE, RETIRED, BankState, Passage, Question, QuestionPassage
from ingest.identity import text_hash
from ingest.index import ASK, PASSAGE, load_index
from ingest.notes import parse_note
from ingest.parsers import parse_document
from tests.conftest import ROOT, Tutor, ingest_with
from tests.fakes import FakeEncoder

NOTES = ROOT / "data" / "notes"

NOTE = """---
title: Sampling
topics: [data-parallelism]
references:
  - id: torch-data
    organisation: PyTorch contributors
    title: "torch.utils.data"
    year: 2025
    where: https://docs.pytorch.org/docs/stable/data.html
  - id: li2020
    authors: [Shen Li, Yanli Zhao]
    title: "PyTorch Distributed"
    version: "VLDB 2020"
explains:
  - {file: 003_28df717c268ee6dd.txt, number: 5, section: "Splitting the data"}
  - {file: 000_78b4b506bc754b1f.txt, number: 3, section: "Gradients"}
asks:
  - section: "Padding"
    questions: ["what if the dataset does not divide evenly across ranks?"]
  - section: "Splitting the data"
    questions: ["how does each gpu get different samples?", "why call set_epoch"]
---

Intro before any heading [li2020].

## Splitting the data

Every rank takes every N-th index [torch-data, §2.1]; the strides are disjoint.
A second line of the same paragraph [torch-data; li2020, §3].

Call `set_epoch` each epoch; `mesh["tp"]` in code is no citation, nor is [ ] or [0, 1].

### Padding

With drop_last=False the list is padded [torch-data].

```python
for epoch in range(3):

    sampler.set_epoch(epoch)  # [not-a-citation]
```

## Gradients

DDP all-reduces gradients in buckets [li2020].
"""


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _session(settings: Settings):  # type: ignore[no-untyped-def]
    engine = make_engine(settings.db_url)
    return engine, make_sessionmaker(engine)


def _passages(settings: Settings) -> dict[str, tuple[str, str, str]]:
    engine, factory = _session(settings)
    with transaction(factory) as session:
        rows = {p.id: (p.status, p.note, p.content_hash) for p in session.scalars(select(Passage))}
    engine.dispose()
    return rows


def _links(settings: Settings) -> set[tuple[str, str]]:
    engine, factory = _session(settings)
    with transaction(factory) as session:
        rows = {(r.question_id, r.passage_id) for r in session.scalars(select(QuestionPassage))}
    engine.dispose()
    return rows


def _index_digest(settings: Settings) -> dict[str, str]:
    return {
        str(p.relative_to(settings.index_path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(settings.index_path.rglob("*"))
        if p.is_file()
    }


def _with_notes(settings: Settings) -> Path:
    """The project's notes copied into the test's data folder."""
    shutil.copytree(NOTES, settings.notes_path)
    return settings.notes_path


# --- parsing --------------------------------------------------------------------------------------


def test_a_note_splits_into_passages_at_headings_then_paragraphs(tmp_path: Path) -> None:
    result = parse_note(_write(tmp_path, "sampling.md", NOTE))
    assert result.ok, result.issues
    assert result.title == "Sampling"
    got = [(p.heading_path, p.line_start, p.line_end) for p in result.passages]
    assert got == [
        ([], 24, 24),
        (["Splitting the data"], 28, 29),
        (["Splitting the data"], 31, 31),
        (["Splitting the data", "Padding"], 35, 35),
        (["Splitting the data", "Padding"], 37, 41),  # the fenced block stays whole, blank line included
        (["Gradients"], 45, 45),
    ]
    lines = NOTE.splitlines()
    for p in result.passages:  # line spans are the file's lines
        assert lines[p.line_start - 1].strip() == p.text.splitlines()[0].strip()
    first = result.passages[1]
    assert [(c["id"], c["locators"]) for c in first.citations] == [("torch-data", ["§2.1"]), ("li2020", ["§3"])]
    assert first.citations[0]["organisation"] == "PyTorch contributors" and first.citations[0]["year"] == "2025"
    assert result.passages[0].citations[0]["authors"] == "Shen Li, Yanli Zhao"
    assert result.passages[0].citations[0]["version"] == "VLDB 2020"
    assert result.passages[2].citations == []  # code spans, "[ ]" and "[0, 1]" are not citations
    assert result.passages[4].citations == []  # nor is anything in a fenced block
    # a section's passages, its subsections' included, explain the question that names it
    q5 = {"file": "003_28df717c268ee6dd.txt", "number": 5}
    assert [p.explains for p in result.passages] == [
        [], [q5], [q5], [q5], [q5], [{"file": "000_78b4b506bc754b1f.txt", "number": 3}]
    ]
    assert all(p.note == "sampling.md" and p.title == "Sampling" for p in result.passages)
    assert len({p.id for p in result.passages}) == len(result.passages)
    # a section's authored questions are kept on its first passage
    assert [p.asks for p in result.passages] == [
        [], ["how does each gpu get different samples?", "why call set_epoch"], [],
        ["what if the dataset does not divide evenly across ranks?"], [], []
    ]


def test_passage_ids_are_stable_and_independent_of_position(tmp_path: Path) -> None:
    before = parse_note(_write(tmp_path, "sampling.md", NOTE))
    moved = NOTE.replace("Intro before any heading [li2020].\n", "Intro before any heading [li2020].\n\n\n\n")
    after = parse_note(_write(tmp_path, "sampling.md", moved))
    assert [p.id for p in after.passages] == [p.id for p in before.passages]
    assert [p.line_start for p in after.passages][1:] != [p.line_start for p in before.passages][1:]


MALFORMED = [
    ("no front matter", lambda t: t.replace("---\ntitle", "title", 1), 1, "no YAML front matter"),
    ("unclosed front matter", lambda t: t.replace("\n---\n\nIntro", "\n\nIntro", 1), 1, "not closed"),
    ("bad YAML", lambda t: t.replace("topics: [data-parallelism]", "topics: [data-parallelism"), 4, "not valid YAML"),
    ("no title", lambda t: t.replace("title: Sampling\n", ""), 0, "no title"),
    ("no topics", lambda t: t.replace("topics: [data-parallelism]", "topics: []"), 3, "no topics"),
    (
        "unknown section",
        lambda t: t.replace('section: "Gradients"', 'section: "Gradient buckets"'),
        16,
        "explains section 'Gradient buckets' is not a heading of this note",
    ),
    ("unknown citation", lambda t: t.replace("in buckets [li2020]", "in buckets [li2021]"), 45, "cites [li2021]"),
    (
        "asks for an unknown section",
        lambda t: t.replace('section: "Padding"', 'section: "Padded"'),
        18,
        "asks section 'Padded' is not a heading of this note",
    ),
    (
        "asks without questions",
        lambda t: t.replace('questions: ["what if the dataset does not divide evenly across ranks?"]', "questions: []"),
        18,
        "asks entry needs section and a list of questions",
    ),
    (
        "asks with a paragraph for a question",
        lambda t: t.replace("why call set_epoch", "why " * 100),
        20,
        "question over 300 characters",
    ),
    (
        "reference without authors",
        lambda t: t.replace("    organisation: PyTorch contributors\n", ""),
        5,
        "reference 'torch-data' has no authors or organisation",
    ),
    (
        "reference without title",
        lambda t: t.replace('    title: "PyTorch Distributed"\n', ""),
        10,
        "reference 'li2020' has no title",
    ),
    (
        "reference without year",
        lambda t: t.replace("    year: 2025\n", ""),
        5,
        "reference 'torch-data' has no year or version",
    ),
    (
        "explains without number",
        lambda t: t.replace("number: 3, ", ""),
        16,
        "explains entry needs file",
    ),
]


@pytest.mark.parametrize(("case", "edit", "line", "reason"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_notes_are_reported_with_file_line_and_reason(
    tmp_path: Path, case: str, edit, line: int, reason: str  # type: ignore[no-untyped-def]
) -> None:
    result = parse_note(_write(tmp_path, "bad.md", edit(NOTE)))
    assert not result.ok and result.passages == []
    issues = [i for i in result.issues if i.severity == "skipped"]
    assert any(reason in i.reason for i in issues), issues
    found = next(i for i in issues if reason in i.reason)
    assert found.file == "bad.md"
    if line:
        assert found.line == line, found


def test_unreadable_notes_are_reported(tmp_path: Path) -> None:
    (tmp_path / "empty.md").write_text("")
    (tmp_path / "binary.md").write_bytes(b"---\x00\x01")
    _write(tmp_path, "bodyless.md", "---\ntitle: T\ntopics: [memory]\n---\n\n")
    reasons = {p.name: parse_note(p).issues[0].reason for p in sorted(tmp_path.iterdir())}
    assert "empty" in reasons["empty.md"] and "binary" in reasons["binary.md"]
    assert "no text" in reasons["bodyless.md"]


# --- the project's notes --------------------------------------------------------------------------


def test_the_real_notes_are_well_formed_and_explain_every_bank_question() -> None:
    bank = {
        (path.name, q.number)
        for path in sorted((ROOT / "data" / "raw").iterdir())
        for q in parse_document(path).questions
    }
    assert len(bank) == 42
    explained: dict[tuple[str, int], int] = {}
    notes = sorted(NOTES.glob("*.md"))
    assert len(notes) == 12
    for path in notes:
        result = parse_note(path)
        assert result.ok, [(i.line, i.reason) for i in result.issues]  # every citation resolves, every section exists
        assert result.issues == []
        text = path.read_text(encoding="utf-8")
        head = text.split("\n---\n", 1)[0]
        import yaml

        front = yaml.safe_load(head.removeprefix("---\n"))
        for ref in front["references"]:
            assert ref.get("authors") or ref.get("organisation"), (path.name, ref["id"])
            assert ref.get("title"), (path.name, ref["id"])
            assert ref.get("year") or ref.get("version"), (path.name, ref["id"])
        cited = {c["id"] for p in result.passages for c in p.citations}
        assert cited <= {r["id"] for r in front["references"]}
        for p in result.passages:
            for target in p.explains:
                key = (target["file"], target["number"])
                explained[key] = explained.get(key, 0) + 1
        for entry in result.explains:
            assert (entry.file, entry.number) in bank, (path.name, entry)
    assert set(explained) == bank, sorted(bank - set(explained))
    assert all(n >= 1 for n in explained.values())


def test_every_section_of_the_real_notes_has_authored_questions() -> None:
    """Each section with text of each note lists at least two questions a learner would ask of it."""
    for path in sorted(NOTES.glob("*.md")):
        result = parse_note(path)
        sections = {p.heading_path[-1] for p in result.passages if p.heading_path}
        asked = {a.section: a.questions for a in result.asks}
        assert set(asked) == sections, (path.name, sections ^ set(asked))
        assert all(len(q) >= 2 for q in asked.values()), path.name


# --- ingestion ------------------------------------------------------------------------------------


def test_notes_are_stored_indexed_and_linked_beside_the_bank(settings: Settings, fake_encoder: FakeEncoder) -> None:
    notes = _with_notes(settings)
    summary = ingest_with(settings, fake_encoder, [settings.raw_path, notes])
    assert summary.skipped == [] and summary.ignored == []
    assert (summary.questions, summary.passages) == (42, summary.passages_added)
    assert summary.passages > 100
    engine, factory = _session(settings)
    with transaction(factory) as session:
        passages = {p.id: p for p in session.scalars(select(Passage))}
        linked = {r.question_id for r in session.scalars(select(QuestionPassage))}
        questions = {q.id for q in session.scalars(select(Question).where(Question.status == ACTIVE))}
        q5 = session.scalars(
            select(Question).where(Question.document.like("003%"), Question.number == 5)
        ).one()
        q5_passages = list(
            session.scalars(
                select(Passage)
                .join(QuestionPassage, QuestionPassage.passage_id == Passage.id)
                .where(QuestionPassage.question_id == q5.id)
                .order_by(QuestionPassage.position)
            )
        )
        state = session.get(BankState, "index_version")
    engine.dispose()
    assert linked == questions  # all 42 questions are explained by at least one passage
    assert {p.note for p in q5_passages} == {"data-parallelism.md"}
    assert all(p.heading_path[0] == "Splitting the data with DistributedSampler" for p in q5_passages)
    assert "set_epoch" in " ".join(p.text for p in q5_passages)
    assert state is not None
    index = load_index(settings.index_path, state.value, fake_encoder.model_id, fake_encoder.dim)
    entries = [e for e in index.entries if e.kind == PASSAGE]
    assert {e.passage_id for e in entries} == set(passages)
    assert all(e.question_id is None for e in entries)
    assert len({e.question_id for e in index.entries if e.kind not in (PASSAGE, ASK)}) == 42
    # every authored question is an entry of the passage that holds it
    asks = sorted((e.passage_id, e.text_hash) for e in index.entries if e.kind == ASK)
    assert asks and all(e.question_id is None for e in index.entries if e.kind == ASK)
    assert asks == sorted((p.id, text_hash(q)) for p in passages.values() for q in p.asks)
    manifest = json.loads((settings.index_path / f"v-{state.value[:16]}" / "manifest.json").read_text())
    assert manifest["count"] == len(index.entries)


def test_unchanged_notes_embed_nothing_and_one_changed_paragraph_embeds_one(
    settings: Settings, fake_encoder: FakeEncoder
) -> None:
    notes = _with_notes(settings)
    paths = [settings.raw_path, notes]
    first = ingest_with(settings, fake_encoder, paths)
    before, index_before, calls = _passages(settings), _index_digest(settings), len(fake_encoder.calls)
    second = ingest_with(settings, fake_encoder, paths)
    assert first.embedded > 0 and second.embedded == 0
    assert len(fake_encoder.calls) == calls  # the encoder was not even asked
    assert (second.passages_added, second.passages_updated, second.passages_retired) == (0, 0, 0)
    assert second.passages_unchanged == first.passages
    assert _passages(settings) == before and _index_digest(settings) == index_before

    path = notes / "data-parallelism.md"
    old = "The strides are disjoint, so each sample goes to one rank per epoch."
    new = "The strides never overlap, so each sample goes to exactly one rank per epoch."
    path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    seen = len(fake_encoder.texts)
    third = ingest_with(settings, fake_encoder, paths)
    assert third.embedded == 1 and len(fake_encoder.texts) == seen + 1
    assert new in fake_encoder.texts[-1]
    assert (third.passages_added, third.passages_retired, third.added, third.updated) == (1, 1, 0, 0)
    assert third.passages == first.passages
    rows = _passages(settings)
    assert sum(r[0] == RETIRED for r in rows.values()) == 1  # kept, marked retired
    assert third.index_version != first.index_version


def test_malformed_note_is_skipped_and_its_passages_stay(settings: Settings, fake_encoder: FakeEncoder) -> None:
    notes = _with_notes(settings)
    ingest_with(settings, fake_encoder, [settings.raw_path, notes])
    before, index_before = _passages(settings), _index_digest(settings)
    path = notes / "memory.md"
    path.write_text(path.read_text(encoding="utf-8").replace("[chen2016sublinear]", "[chen2016]", 1))
    summary = ingest_with(settings, fake_encoder, [settings.raw_path, notes])
    assert [(i.file, i.reason) for i in summary.skipped] == [
        ("memory.md", "cites [chen2016], which is not in references")
    ]
    assert summary.skipped[0].line > 0
    assert summary.passages_retired == 0 and summary.retired == 0
    assert _passages(settings) == before and _index_digest(settings) == index_before


def test_retirement_follows_the_notes_being_ingested(
    settings: Settings, fake_encoder: FakeEncoder, tmp_path: Path
) -> None:
    notes = _with_notes(settings)
    first = ingest_with(settings, fake_encoder, [settings.raw_path, notes])
    memory = {pid for pid, r in _passages(settings).items() if r[1] == "memory.md"}
    # Ingesting one other note, or only the quiz documents, leaves every note's passages alone.
    mine = _write(tmp_path / "my-notes", "extra.md", NOTE)
    one = ingest_with(settings, fake_encoder, [mine])
    assert (one.passages, one.passages_added, one.passages_retired) == (first.passages + 6, 6, 0)
    assert one.questions == 42
    assert ingest_with(settings, fake_encoder, [settings.raw_path]).passages_retired == 0
    # A note deleted from a folder being ingested takes its passages with it.
    (notes / "memory.md").unlink()
    gone = ingest_with(settings, fake_encoder, [settings.raw_path, notes])
    assert gone.passages_retired == len(memory)
    rows = _passages(settings)
    assert all(rows[pid][0] == RETIRED for pid in memory)
    assert all(r[0] == ACTIVE for pid, r in rows.items() if pid not in memory)
    assert not any(pid in memory for _, pid in _links(settings))  # retired passages explain nothing


def test_explains_for_a_question_not_in_the_bank_is_ignored_not_fatal(
    settings: Settings, fake_encoder: FakeEncoder, tmp_path: Path
) -> None:
    text = NOTE.replace("number: 5,", "number: 99,")
    summary = ingest_with(settings, fake_encoder, [settings.raw_path, _write(tmp_path, "sampling.md", text)])
    assert summary.skipped == []
    assert [(i.file, i.line, i.reason) for i in summary.ignored] == [
        ("sampling.md", 15, "explains 003_28df717c268ee6dd.txt question 99, which is not in the bank")
    ]
    assert summary.passages == 6
    # the other entry still links its section
    assert len(_links(settings)) == 1


def test_links_appear_once_the_question_is_in_the_bank(
    settings: Settings, fake_encoder: FakeEncoder, tmp_path: Path
) -> None:
    note = _write(tmp_path, "sampling.md", NOTE)
    early = ingest_with(settings, fake_encoder, [note])
    assert early.questions == 0 and len(early.ignored) == 2 and _links(settings) == set()
    later = ingest_with(settings, fake_encoder, [settings.raw_path])
    assert later.embedded > 0 and len(_links(settings)) == 5  # 4 passages explain Q5, 1 explains Q3


def test_search_returns_questions_only(settings: Settings, fake_encoder: FakeEncoder) -> None:
    from app.bank.search import search

    notes = _with_notes(settings)
    ingest_with(settings, fake_encoder, [settings.raw_path, notes])
    engine, factory = _session(settings)
    with transaction(factory) as session:
        state = session.get(BankState, "index_version")
        assert state is not None
        index = load_index(settings.index_path, state.value, fake_encoder.model_id, fake_encoder.dim)
        hits = search(session, fake_encoder, index, "DistributedSampler set_epoch padding drop_last", k=5)
    engine.dispose()
    assert len(hits) == 5 and all(h.kind != PASSAGE for h in hits)


def test_tutor_ingest_reads_raw_and_notes_and_a_folder_of_notes(
    tutor: Tutor, settings: Settings, fake_encoder: FakeEncoder, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import ingest.embedder

    monkeypatch.setattr(ingest.embedder, "SentenceTransformerEncoder", lambda *_a, **_k: fake_encoder)
    monkeypatch.setenv("TUTOR_EXPORT_ONNX", "false")
    _with_notes(settings)
    first = json.loads(tutor("ingest", "--json").stdout)
    assert (first["questions"], first["skipped"], first["ignored"]) == (42, [], [])
    assert first["passages"] == first["passages_added"] > 100
    assert {d["file"] for d in first["documents"] if d["layout"] == "note"} == {p.name for p in NOTES.glob("*.md")}
    _write(tmp_path / "my-notes", "extra.md", NOTE)
    mine = json.loads(tutor("ingest", str(tmp_path / "my-notes"), "--json").stdout)
    assert (mine["passages_added"], mine["passages_retired"], mine["added"]) == (6, 0, 0)
    assert mine["passages"] == first["passages"] + 6
    bad = _write(tmp_path / "bad-notes", "bad.md", NOTE.replace("title: Sampling\n", ""))
    failed = tutor("ingest", str(bad.parent), "--json", code=1)
    skipped = json.loads(failed.stdout)["skipped"]
    assert skipped == [{"file": "bad.md", "line": 2, "reason": "front matter has no title"}]
