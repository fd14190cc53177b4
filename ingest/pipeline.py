"""`tutor ingest`: documents -> bank rows, cached embeddings and a new index version.

Quiz documents give questions; study notes (`.md`, see ingest/notes.py) give passages, embedded
into the same index and linked to the questions their `explains` entries name.

Order of work, chosen so that a crash at any point (kill -9 included) leaves the previous bank
and index serving:
1. parse every document and note; one that cannot be used is reported and its questions or
   passages are left exactly as they were;
2. embed only texts the cache has not seen (cache rows are committed on their own: they never
   change what is served);
3. write the new index version to its own folder (temporary folder, then rename);
4. in one transaction, upsert questions and passages, retire removed ones, relink passages to
   the questions they explain and point the bank at the new index version;
5. delete index versions that are no longer live.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db import transaction
from app.models import ACTIVE, RETIRED, BankState, Passage, Question, QuestionPassage, utcnow
from ingest.annotations import load_annotations
from ingest.concepts import link_concepts
from ingest.embedder import Encoder
from ingest.identity import content_hash, question_id, text_hash
from ingest.index import (
    ASK,
    INDEX_MODEL_KEY,
    INDEX_VERSION_KEY,
    PASSAGE,
    IndexEntry,
    remove_other_versions,
    write_index,
)
from ingest.notes import LAYOUT as NOTE_LAYOUT
from ingest.notes import NoteResult, PassageRecord, is_note, parse_note
from ingest.parsers import ParseIssue, ParseResult, parse_document
from ingest.records import QuestionRecord, build_records
from ingest.taxonomy import Taxonomy
from ingest.vectors import CachedEncoder, VectorCache

Progress = Callable[[str, int, int], None]


@dataclass
class IngestSummary:
    """What one ingestion run did."""

    questions: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    retired: int = 0
    passages: int = 0
    passages_added: int = 0
    passages_updated: int = 0
    passages_unchanged: int = 0
    passages_retired: int = 0
    embedded: int = 0
    skipped: list[ParseIssue] = field(default_factory=list)
    ignored: list[ParseIssue] = field(default_factory=list)
    documents: list[dict[str, Any]] = field(default_factory=list)
    index_version: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The JSON printed by `tutor ingest --json`."""
        return {
            "questions": self.questions,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "retired": self.retired,
            "passages": self.passages,
            "passages_added": self.passages_added,
            "passages_updated": self.passages_updated,
            "passages_unchanged": self.passages_unchanged,
            "passages_retired": self.passages_retired,
            "embedded": self.embedded,
            "skipped": [i.as_dict() for i in self.skipped],
            "ignored": [i.as_dict() for i in self.ignored],
            "documents": self.documents,
            "index_version": self.index_version[:16],
        }


@dataclass
class IngestConfig:
    """Where ingestion reads its side files and writes the index."""

    index_dir: Path
    taxonomy_path: Path
    annotations_path: Path
    near_duplicate_threshold: float = 0.8
    # What else a question needs embedded before it is served (the grader's key ideas), given by
    # the caller: ingestion knows nothing of grading. It embeds through the cache it is handed.
    precompute: Callable[[list[QuestionRecord], Encoder], None] | None = None


def collect_files(paths: Iterable[Path]) -> tuple[list[Path], list[Path], list[ParseIssue]]:
    """Expand folders into their visible files; report paths that do not exist."""
    files: list[Path] = []
    folders: list[Path] = []
    missing: list[ParseIssue] = []
    for path in paths:
        if path.is_dir():
            folders.append(path.resolve())
            files += sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
        elif path.is_file():
            files.append(path)
        else:
            missing.append(ParseIssue(str(path), 0, "no such file or folder"))
    return files, folders, missing


def _retire_scope(results: list[ParseResult], folders: list[Path]) -> Callable[[Question], bool]:
    """Which existing rows this run speaks for: parsed files, and deleted files in given folders.

    A question skipped for being malformed keeps its previous version: it is not covered.
    """
    parsed = {str(r.path.resolve()) for r in results if r.ok}
    protected = {
        question_id(r.path.name, issue.question)
        for r in results
        for issue in r.issues
        if issue.severity == "skipped" and issue.question
    }

    def covered(row: Question) -> bool:
        if row.id in protected:
            return False
        if row.source_path in parsed:
            return True
        src = Path(row.source_path)
        return not src.exists() and any(src.parent == folder for folder in folders)

    return covered


def _note_scope(notes: list[NoteResult], folders: list[Path]) -> Callable[[Passage], bool]:
    """Which existing passages this run speaks for: notes that parsed, and deleted notes in given folders.

    A note skipped for being malformed keeps the passages it had: they are not covered.
    """
    parsed = {str(n.path.resolve()) for n in notes if n.ok}

    def covered(row: Passage) -> bool:
        if row.source_path in parsed:
            return True
        src = Path(row.source_path)
        return not src.exists() and any(src.parent == folder for folder in folders)

    return covered


def run_ingest(
    paths: list[Path],
    factory: sessionmaker[Session],
    model_id: str,
    encoder: Callable[[], Encoder],
    config: IngestConfig,
    progress: Progress | None = None,
) -> IngestSummary:
    """Ingest documents into the bank and index; see the module docstring for the order."""
    summary = IngestSummary()
    files, folders, missing = collect_files(paths)
    summary.skipped += missing
    results = []
    notes = []
    for i, file in enumerate(files):
        if is_note(file):
            note = parse_note(file)
            notes.append(note)
            issues = note.issues
            summary.documents.append(
                {"file": file.name, "layout": NOTE_LAYOUT if note.ok else None, "questions": 0,
                 "passages": len(note.passages)}
            )
        else:
            result = parse_document(file)
            results.append(result)
            issues = result.issues
            summary.documents.append({"file": file.name, "layout": result.layout, "questions": len(result.questions)})
        for issue in issues:
            (summary.skipped if issue.severity == "skipped" else summary.ignored).append(issue)
        if progress:
            progress("parse", i + 1, len(files))
    taxonomy = Taxonomy.load(config.taxonomy_path)
    records = build_records(results, taxonomy, load_annotations(config.annotations_path), summary.ignored)
    covered = _retire_scope(results, folders)
    passages = [p for n in notes if n.ok for p in n.passages]
    for note in notes:
        unknown = taxonomy.unknown(note.passages[0].topics) if note.passages else []
        if unknown:
            summary.ignored.append(ParseIssue(note.path.name, 2, f"unknown topics {unknown} kept as tags", "ignored"))
    covered_passage = _note_scope(notes, folders)

    with transaction(factory) as session:
        existing = {q.id: q for q in session.scalars(select(Question))}
        old_passages = {p.id: p for p in session.scalars(select(Passage))}
    keep = [q for q in existing.values() if q.status == ACTIVE and not covered(q)]
    live = records + [_record_of(q) for q in keep]
    kept_passages = [p for p in old_passages.values() if p.status == ACTIVE and not covered_passage(p)]
    live_passages = _unique(passages + [_passage_of(p) for p in kept_passages])
    links = _links(live, live_passages)
    summary.ignored += _unexplained(notes, live)

    cache = VectorCache(factory, model_id)
    texts = ([t for r in live for t in r.embed_texts()] + [p.embed_text for p in live_passages]
             + [q for p in live_passages for q in p.asks])
    summary.embedded = cache.ensure(texts, encoder, progress)
    vectors = cache.get_many(texts)
    if config.precompute is not None:
        cached = CachedEncoder(cache, encoder)
        config.precompute(live, cached)
        summary.embedded += cached.embedded

    terms = {r.id: taxonomy.primary_concept(r.text) for r in live}
    concept_of = link_concepts(live, vectors, config.near_duplicate_threshold, terms)
    entries, index_vectors = _index_entries(live, vectors, live_passages)
    dim = next(iter(vectors.values())).shape[0] if vectors else cache.dim(encoder)
    extra = _served_digest(live_passages, links) if live_passages else ""
    version = write_index(config.index_dir, model_id, dim, entries, index_vectors, extra=extra)

    with transaction(factory) as session:
        _apply(session, records, existing, covered, concept_of, summary)
        _apply_passages(session, _unique(passages), old_passages, covered_passage, summary)
        _apply_links(session, links)
        _set_state(session, INDEX_VERSION_KEY, version)
        _set_state(session, INDEX_MODEL_KEY, model_id)
        summary.questions = len(live)
        summary.passages = len(live_passages)
    summary.index_version = version
    remove_other_versions(config.index_dir, version)
    return summary


def _unique(passages: list[PassageRecord]) -> list[PassageRecord]:
    """One record per passage id (the same note given twice in one run counts once)."""
    return list({p.id: p for p in passages}.values())


def _links(records: list[QuestionRecord], passages: list[PassageRecord]) -> dict[str, list[str]]:
    """Question id -> the passages that explain it, in reading order (note file, then position)."""
    by_place: dict[tuple[str, int], list[str]] = {}
    for r in records:
        by_place.setdefault((r.document, r.number), []).append(r.id)
    links: dict[str, list[str]] = {}
    for p in sorted(passages, key=lambda p: (p.note, p.position, p.id)):
        for target in p.explains:
            for qid in by_place.get((target["file"], target["number"]), []):
                if p.id not in links.setdefault(qid, []):
                    links[qid].append(p.id)
    return links


def _unexplained(notes: list[NoteResult], records: list[QuestionRecord]) -> list[ParseIssue]:
    """`explains` entries of this run's notes whose question is not in the bank (reported, not fatal)."""
    places = {(r.document, r.number) for r in records}
    return [
        ParseIssue(
            note.path.name,
            entry.line,
            f"explains {entry.file} question {entry.number}, which is not in the bank",
            "ignored",
        )
        for note in notes
        if note.ok
        for entry in note.explains
        if (entry.file, entry.number) not in places
    ]


def _served_digest(passages: list[PassageRecord], links: dict[str, list[str]]) -> str:
    """What is served beside the passages' vectors (citations, headings, lines, links), as one hash."""
    return content_hash(
        {"passages": sorted((p.id, p.content_hash) for p in passages), "links": sorted(links.items())}
    )


def _index_entries(
    records: list[QuestionRecord], vectors: dict[str, Any], passages: list[PassageRecord] | None = None
) -> tuple[list[IndexEntry], Any]:
    import numpy as np

    entries: list[IndexEntry] = []
    rows = []
    for r in sorted(records, key=lambda r: r.id):
        texts = [("question", r.text)] + [("answer", a) for a in [*r.accepted_answers, *r.extra_answers]]
        if r.explanation:
            texts.append(("explanation", r.explanation))
        for kind, text in texts:
            entries.append(IndexEntry(r.id, kind, text_hash(text)))
            rows.append(vectors[text])
    for p in sorted(passages or [], key=lambda p: p.id):
        entries.append(IndexEntry(None, PASSAGE, text_hash(p.embed_text), p.id))
        rows.append(vectors[p.embed_text])
        for question in p.asks:
            entries.append(IndexEntry(None, ASK, text_hash(question), p.id))
            rows.append(vectors[question])
    return entries, (np.stack(rows) if rows else np.zeros((0, 1), dtype=np.float32))


def _record_of(q: Question) -> QuestionRecord:
    return QuestionRecord(id=q.id, **_copied(q, _FIELDS))


def _passage_of(p: Passage) -> PassageRecord:
    return PassageRecord(id=p.id, **_copied(p, _PASSAGE_FIELDS))


def _copied(row: Any, fields: tuple[str, ...]) -> dict[str, Any]:
    """A stored row's fields for its record (lists copied, so the record never shares the row's)."""
    return {name: list(value) if isinstance(value := getattr(row, name), list) else value for name in fields}


_PASSAGE_FIELDS = (
    "note",
    "source_path",
    "title",
    "topics",
    "heading_path",
    "position",
    "line_start",
    "line_end",
    "text",
    "citations",
    "explains",
    "asks",
)


_FIELDS = (
    "document",
    "source_path",
    "layout",
    "number",
    "line_start",
    "line_end",
    "text",
    "accepted_answers",
    "wrong_options",
    "explanation",
    "topics",
    "notes",
    "extra_answers",
    "examples",
)


@dataclass
class _Counts:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    retired: int = 0


def _upsert(
    session: Session,
    model: Any,
    records: Sequence[Any],
    existing: Mapping[str, Any],
    covered: Callable[[Any], bool],
    fields: tuple[str, ...],
    new_row: Callable[[Any, datetime], Any],
) -> _Counts:
    """Upsert records (questions or passages) by id and content hash; retire what is covered and gone."""
    now = utcnow()
    seen = set()
    counts = _Counts()
    for rec in records:
        seen.add(rec.id)
        row = session.get(model, rec.id)
        digest = rec.content_hash
        if row is None:
            row = new_row(rec, now)
            session.add(row)
            counts.added += 1
        elif row.status != ACTIVE:
            counts.added += 1
        elif row.content_hash != digest:
            counts.updated += 1
        else:
            counts.unchanged += 1
        if row.content_hash != digest or row.status != ACTIVE:
            for name in fields:
                setattr(row, name, getattr(rec, name))
            row.content_hash, row.status, row.retired_at, row.updated_at = digest, ACTIVE, None, now
    for rid, old in existing.items():
        if rid not in seen and old.status == ACTIVE and covered(old):
            row = session.get(model, rid)
            assert row is not None
            row.status, row.retired_at = RETIRED, now
            counts.retired += 1
    return counts


def _apply(
    session: Session,
    records: list[QuestionRecord],
    existing: dict[str, Question],
    covered: Callable[[Question], bool],
    concept_of: dict[str, str],
    summary: IngestSummary,
) -> None:
    """Upsert this run's records, retire what its documents no longer hold, relink concepts."""
    counts = _upsert(session, Question, records, existing, covered, _FIELDS,
                     lambda rec, now: Question(id=rec.id, concept_id=concept_of.get(rec.id, rec.id), created_at=now,
                                               status=ACTIVE))
    summary.added += counts.added
    summary.updated += counts.updated
    summary.unchanged += counts.unchanged
    summary.retired += counts.retired
    for row in session.scalars(select(Question).where(Question.status == ACTIVE)):
        concept = concept_of.get(row.id, row.id)
        if row.concept_id != concept:
            row.concept_id = concept


def _apply_passages(
    session: Session,
    passages: list[PassageRecord],
    existing: dict[str, Passage],
    covered: Callable[[Passage], bool],
    summary: IngestSummary,
) -> None:
    """Upsert this run's passages and retire those its notes no longer hold."""
    counts = _upsert(session, Passage, passages, existing, covered, _PASSAGE_FIELDS,
                     lambda rec, now: Passage(id=rec.id, created_at=now, status=ACTIVE))
    summary.passages_added += counts.added
    summary.passages_updated += counts.updated
    summary.passages_unchanged += counts.unchanged
    summary.passages_retired += counts.retired


def _apply_links(session: Session, links: dict[str, list[str]]) -> None:
    """Make the question -> passage links exactly `links` (only live questions and passages appear there)."""
    want = {(qid, pid): pos for qid, pids in links.items() for pos, pid in enumerate(pids)}
    session.flush()  # new passages exist before links point at them
    for row in session.scalars(select(QuestionPassage)):
        pos = want.pop((row.question_id, row.passage_id), None)
        if pos is None:
            session.delete(row)
        elif row.position != pos:
            row.position = pos
    session.flush()
    for (qid, pid), pos in want.items():
        session.add(QuestionPassage(question_id=qid, passage_id=pid, position=pos))


def _set_state(session: Session, key: str, value: str) -> None:
    row = session.get(BankState, key)
    if row is None:
        session.add(BankState(key=key, value=value))
    elif row.value != value:
        row.value = value
