"""`tutor ingest`: documents -> bank rows, cached embeddings and a new index version.

Order of work, chosen so that a crash at any point (kill -9 included) leaves the previous bank
and index serving:
1. parse every document; a document that cannot be used is reported and its questions are
   left exactly as they were;
2. embed only texts the cache has not seen (cache rows are committed on their own: they never
   change what is served);
3. write the new index version to its own folder (temporary folder, then rename);
4. in one transaction, upsert questions, retire removed ones and point the bank at the new
   index version;
5. delete index versions that are no longer live.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.db import transaction
from app.models import ACTIVE, RETIRED, BankState, Question, utcnow
from ingest.annotations import load_annotations
from ingest.concepts import link_concepts
from ingest.embedder import Encoder
from ingest.identity import question_id, text_hash
from ingest.index import INDEX_MODEL_KEY, INDEX_VERSION_KEY, IndexEntry, remove_other_versions, write_index
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
    for i, file in enumerate(files):
        result = parse_document(file)
        results.append(result)
        for issue in result.issues:
            (summary.skipped if issue.severity == "skipped" else summary.ignored).append(issue)
        summary.documents.append({"file": file.name, "layout": result.layout, "questions": len(result.questions)})
        if progress:
            progress("parse", i + 1, len(files))
    taxonomy = Taxonomy.load(config.taxonomy_path)
    records = build_records(results, taxonomy, load_annotations(config.annotations_path), summary.ignored)
    covered = _retire_scope(results, folders)

    with transaction(factory) as session:
        existing = {q.id: q for q in session.scalars(select(Question))}
    keep = [q for q in existing.values() if q.status == ACTIVE and not covered(q)]
    live = records + [_record_of(q) for q in keep]

    cache = VectorCache(factory, model_id)
    texts = [t for r in live for t in r.embed_texts()]
    summary.embedded = cache.ensure(texts, encoder, progress)
    vectors = cache.get_many(texts)
    if config.precompute is not None:
        cached = CachedEncoder(cache, encoder)
        config.precompute(live, cached)
        summary.embedded += cached.embedded

    terms = {r.id: taxonomy.primary_concept(r.text) for r in live}
    concept_of = link_concepts(live, vectors, config.near_duplicate_threshold, terms)
    entries, index_vectors = _index_entries(live, vectors)
    dim = next(iter(vectors.values())).shape[0] if vectors else cache.dim(encoder)
    version = write_index(config.index_dir, model_id, dim, entries, index_vectors)

    with transaction(factory) as session:
        _apply(session, records, existing, covered, concept_of, summary)
        _set_state(session, INDEX_VERSION_KEY, version)
        _set_state(session, INDEX_MODEL_KEY, model_id)
        summary.questions = len(live)
    summary.index_version = version
    remove_other_versions(config.index_dir, version)
    return summary


def _index_entries(records: list[QuestionRecord], vectors: dict[str, Any]) -> tuple[list[IndexEntry], Any]:
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
    return entries, (np.stack(rows) if rows else np.zeros((0, 1), dtype=np.float32))


def _record_of(q: Question) -> QuestionRecord:
    return QuestionRecord(
        id=q.id,
        document=q.document,
        source_path=q.source_path,
        layout=q.layout,
        number=q.number,
        line_start=q.line_start,
        line_end=q.line_end,
        text=q.text,
        accepted_answers=list(q.accepted_answers),
        wrong_options=list(q.wrong_options),
        explanation=q.explanation,
        topics=list(q.topics),
        notes=list(q.notes),
        extra_answers=list(q.extra_answers),
        examples=list(q.examples),
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


def _apply(
    session: Session,
    records: list[QuestionRecord],
    existing: dict[str, Question],
    covered: Callable[[Question], bool],
    concept_of: dict[str, str],
    summary: IngestSummary,
) -> None:
    """Upsert this run's records, retire what its documents no longer hold, relink concepts."""
    now = utcnow()
    seen = set()
    for rec in records:
        seen.add(rec.id)
        row = session.get(Question, rec.id)
        digest = rec.content_hash
        if row is None:
            row = Question(id=rec.id, concept_id=concept_of.get(rec.id, rec.id), created_at=now, status=ACTIVE)
            session.add(row)
            summary.added += 1
        elif row.status != ACTIVE:
            summary.added += 1
        elif row.content_hash != digest:
            summary.updated += 1
        else:
            summary.unchanged += 1
        if row.content_hash != digest or row.status != ACTIVE:
            for name in _FIELDS:
                setattr(row, name, getattr(rec, name))
            row.content_hash, row.status, row.retired_at, row.updated_at = digest, ACTIVE, None, now
    for qid, old in existing.items():
        if qid not in seen and old.status == ACTIVE and covered(old):
            row = session.get(Question, qid)
            assert row is not None
            row.status, row.retired_at = RETIRED, now
            summary.retired += 1
    for row in session.scalars(select(Question).where(Question.status == ACTIVE)):
        concept = concept_of.get(row.id, row.id)
        if row.concept_id != concept:
            row.concept_id = concept


def _set_state(session: Session, key: str, value: str) -> None:
    row = session.get(BankState, key)
    if row is None:
        session.add(BankState(key=key, value=value))
    elif row.value != value:
        row.value = value
