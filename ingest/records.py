"""From parsed documents to the rows the bank should hold."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ingest.annotations import Annotation
from ingest.identity import content_hash, question_id
from ingest.parsers import ParseIssue, ParseResult
from ingest.taxonomy import Taxonomy


@dataclass
class QuestionRecord:
    """Everything stored about one question, before it meets the database."""

    id: str
    document: str
    source_path: str
    layout: str
    number: int
    line_start: int
    line_end: int
    text: str
    accepted_answers: list[str]
    wrong_options: list[str]
    explanation: str | None
    topics: list[str]
    notes: list[str]
    extra_answers: list[str]
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def content_hash(self) -> str:
        """Hash of the stored fields (the position in the file counts: citations use it)."""
        return content_hash(asdict(self))

    def embed_texts(self) -> list[str]:
        """Every text of this question the service needs a vector for."""
        texts = [self.text, *self.accepted_answers, *self.extra_answers, *self.wrong_options]
        texts += [e["answer"] for e in self.examples]
        if self.explanation:
            texts.append(self.explanation)
        return texts


def build_records(
    results: list[ParseResult],
    taxonomy: Taxonomy,
    annotations: dict[str, Annotation],
    issues: list[ParseIssue],
) -> list[QuestionRecord]:
    """Turn parse results into records, tagging topics and attaching author annotations."""
    records: dict[str, QuestionRecord] = {}
    for result in results:
        path: Path = result.path
        for q in result.questions:
            qid = question_id(path.name, q.text)
            if qid in records:
                issues.append(
                    ParseIssue(
                        path.name,
                        q.line_start,
                        f"question {q.number} repeats question {records[qid].number} of the same document",
                        "ignored",
                    )
                )
                continue
            note = annotations.get(qid)
            topics = list(q.topics) or taxonomy.tag(q.text, *q.accepted_answers)
            if note and note.topics is not None:
                topics = list(note.topics)
            unknown = taxonomy.unknown(topics)
            if unknown:
                issues.append(ParseIssue(path.name, q.line_start, f"unknown topics {unknown} kept as tags", "ignored"))
            records[qid] = QuestionRecord(
                id=qid,
                document=path.name,
                source_path=str(path.resolve()),
                layout=str(result.layout),
                number=q.number,
                line_start=q.line_start,
                line_end=q.line_end,
                text=q.text,
                accepted_answers=list(q.accepted_answers),
                wrong_options=list(q.wrong_options),
                explanation=q.explanation,
                topics=topics,
                notes=[*q.notes, *(note.notes if note else [])],
                extra_answers=list(note.extra_answers) if note else [],
                examples=[{"answer": e.answer, "label": e.label} for e in q.examples],
            )
    return list(records.values())
