"""Fuzzing the document parsers and ingestion with damaged quiz documents and study notes.

Every layout (inline options, Question / Accepted Answer / Answer blocks with explanations or distractors,
YAML and JSON banks, Markdown notes with front matter) is generated, or read from the project's own
documents, then damaged (tests/reliability/documents.py). Whatever comes in:

- parsing never raises: it gives questions or passages, or skips reported with a line and a reason;
- the lines reported are lines of the file as an editor counts them;
- line endings and byte order marks change nothing;
- ingestion never crashes on such a file, the bank and the index it leaves agree, and a document that
  cannot be used leaves its questions exactly as they were.

TUTOR_FUZZ_EXAMPLES scales the number of examples (default 1: the CI budget); failing examples are kept in
.pytest_cache/hypothesis and replayed first on the next run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from sqlalchemy import select

from app.config import Settings
from app.db import make_engine, make_sessionmaker, transaction
from app.models import ACTIVE, BankState, Passage, Question
from ingest.cleaning import clean
from ingest.identity import question_id
from ingest.index import INDEX_VERSION_KEY, load_index
from ingest.notes import NoteResult, is_note, parse_note
from ingest.parsers import ParseResult, parse_document
from tests.conftest import ROOT, SEEDS, ingest_with
from tests.fakes import FakeEncoder
from tests.reliability.documents import (
    SEED_NAMES,
    block_document,
    inline_document,
    mutate,
    mutations,
    note_document,
    physical_lines,
    structured_document,
)

NOTES = ROOT / "data" / "notes"
NOTE_NAMES = sorted(p.name for p in NOTES.glob("*.md"))
SCALE = max(1, int(os.environ.get("TUTOR_FUZZ_EXAMPLES", "1")))


def _fuzz(examples: int) -> Any:
    return settings(
        max_examples=examples * SCALE,
        deadline=None,
        database=DirectoryBasedExampleDatabase(ROOT / ".pytest_cache" / "hypothesis"),
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        print_blob=True,
    )


def _seed(name: str) -> str:
    return (SEEDS / name).read_text(encoding="utf-8")


def _note(name: str) -> str:
    return (NOTES / name).read_text(encoding="utf-8")


documents = st.one_of(
    inline_document().map(lambda t: (t, ".txt")),
    block_document().map(lambda t: (t, ".txt")),
    structured_document(),
    note_document().map(lambda t: (t, ".md")),
    st.sampled_from(SEED_NAMES).map(lambda n: (_seed(n), ".txt")),
    st.sampled_from(NOTE_NAMES).map(lambda n: (_note(n), ".md")),
)
"""(text, the suffix its layout is read from)."""

suffixes = st.one_of(st.none(), st.none(), st.none(), st.sampled_from([".txt", ".md", ".yaml", ".json", ""]))
"""None: the document's own suffix; otherwise a mismatched one (a note named .txt, a bank named .md...)."""


# --- what every parse must satisfy ------------------------------------------------------------------------


def _usable(text: str) -> bool:
    """Text the bank can store on both databases and hash: no NUL, no lone surrogate."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def _check_quiz(result: ParseResult, data: bytes, name: str) -> None:
    # YAML marks count NEL, LS and PS as line breaks too
    bound = physical_lines(data, yaml_breaks=Path(name).suffix.lower() in (".yaml", ".yml", ".json"))
    assert result.questions or any(i.severity == "skipped" for i in result.issues), result.issues
    for issue in result.issues:
        assert issue.file == name
        assert isinstance(issue.line, int) and 0 <= issue.line <= bound, (issue, bound)
        assert issue.reason.strip() and len(issue.reason) < 1000, issue
        assert issue.severity in ("skipped", "ignored")
        assert issue.question is None or _usable(issue.question), issue
    for q in result.questions:
        assert q.text and q.text == clean(q.text), q
        assert q.accepted_answers and all(a and a == clean(a) for a in q.accepted_answers), q
        assert 0 <= q.number < 2**31, q.number  # the bank's Integer column
        assert 0 <= q.line_start <= q.line_end <= bound, (q.line_start, q.line_end, bound)
        texts = [q.text, *q.accepted_answers, *q.wrong_options, *q.topics, *q.notes, q.explanation or ""]
        texts += [e.answer for e in q.examples]
        assert all(_usable(t) for t in texts), q


def _check_note(result: NoteResult, data: bytes, name: str) -> None:
    bound = physical_lines(data, yaml_breaks=True)
    assert result.passages or any(i.severity == "skipped" for i in result.issues), result.issues
    assert result.ok or not result.passages
    for issue in result.issues:
        assert issue.file == name
        assert isinstance(issue.line, int) and 0 <= issue.line <= bound, (issue, bound)
        assert issue.reason.strip() and len(issue.reason) < 1000, issue
    assert len({p.id for p in result.passages}) == len(result.passages)
    for p in result.passages:
        assert p.text.strip() and 1 <= p.line_start <= p.line_end <= bound, (p.line_start, p.line_end, bound)
        assert all(_usable(t) for t in [p.title, p.text, *p.topics, *p.heading_path]), p
        assert all(_usable(str(v)) for c in p.citations for v in c.values()), p.citations
    for entry in result.explains:
        assert entry.number >= 1 and _usable(entry.file) and _usable(entry.section)


def _parse(path: Path, data: bytes) -> ParseResult | NoteResult:
    if is_note(path):
        parsed = parse_note(path)
        _check_note(parsed, data, path.name)
        return parsed
    result = parse_document(path)
    _check_quiz(result, data, path.name)
    return result


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    """A folder for the examples' files (hypothesis reruns a test body; a function-scoped tmp_path would not
    be fresh for each run)."""
    with tempfile.TemporaryDirectory(prefix="fuzz-") as folder:
        yield Path(folder)


@_fuzz(500)
@given(doc=documents, steps=mutations, suffix=suffixes)
def test_a_damaged_document_is_parsed_or_reported_and_never_raises(
        scratch: Path, doc: tuple[str, str], steps: list[tuple[Any, ...]], suffix: str | None) -> None:
    text, own = doc
    data = mutate(text.encode("utf-8"), steps)
    path = scratch / f"doc{own if suffix is None else suffix}"
    path.write_bytes(data)
    note(f"{path.name}: {data[:3000]!r}")
    _parse(path, data)


def _summary(result: ParseResult | NoteResult) -> Any:
    """What a parse gives, without the path."""
    issues = [(i.line, i.reason, i.severity, i.question) for i in result.issues]
    if isinstance(result, NoteResult):
        return result.title, issues, [(p.id, p.heading_path, p.line_start, p.line_end, p.text, p.citations,
                                       p.explains) for p in result.passages]
    return result.layout, result.title, issues, [
        (q.number, q.text, q.accepted_answers, q.wrong_options, q.explanation, q.line_start, q.line_end, q.topics,
         q.notes, q.examples) for q in result.questions]


@_fuzz(200)
@given(doc=documents, seed=st.integers(0, 2**16), bom=st.none() | st.floats(0, 1))
def test_line_endings_and_byte_order_marks_change_nothing(
        scratch: Path, doc: tuple[str, str], seed: int, bom: float | None) -> None:
    text, suffix = doc
    original = text.encode("utf-8")
    steps: list[tuple[Any, ...]] = [("endings", seed)] + ([("bom", bom)] if bom is not None else [])
    damaged = mutate(original, steps)
    path = scratch / f"same{suffix}"  # one name for both, so that issues compare equal
    path.write_bytes(original)
    before = _summary(_parse(path, original))
    path.write_bytes(damaged)
    note(f"{path.name}: {damaged[:3000]!r}")
    assert _summary(_parse(path, damaged)) == before


# --- lines that make a regular expression backtrack --------------------------------------------------------

_PATHOLOGICAL = """
import sys
from pathlib import Path
from ingest.notes import parse_note
from ingest.parsers import parse_document

n = 500_000
front = "---\\ntitle: T\\ntopics: [memory]\\nreferences: [{id: r, authors: A, title: T, year: 2020}]\\n---\\n\\n"
cases = {
    "heading.md": front + "# a" + " " * n + "b\\n",
    "heading_tabs.md": front + "## a" + " \\t" * (n // 2) + "#b\\n",
    "backticks.md": front + "`" * n + "\\n",
    "backtick_pairs.md": front + "``a" * (n // 3) + "\\n",
    "brackets.md": front + "[r" * (n // 2) + "\\n",
    "option.txt": "T\\nQuestion 1: q\\n- a" + " " * n + "b\\nCorrect answer: a\\n",
    "marked_option.txt": "T\\nQuestion 1: q\\n- a" + " (correct)" * (n // 10) + " x\\nCorrect answer: a\\n",
    "question.txt": "T\\nQuestion 1:" + " " * n + "q\\n- a (Correct answer)\\n",
    "trailer.txt": "NCA practice test\\nQuestion 1: q\\n- a (Correct answer)\\n" + "nca " + "practice " * (n // 9),
    "block.txt": "T\\n\\nQuestion 1\\n\\nq\\n\\nAccepted Answer" + " " * n + ":\\n\\na\\n",
    "accepted.txt": "T\\n\\nQuestion 1\\n\\nq\\n\\nAccepted Answer\\n\\nAccepted Answer" + " " * n + "x\\n",
    "answer.txt": "T\\n\\nQuestion 1\\n\\nq\\n\\nAccepted Answer\\n\\na\\n\\nAnswer" + " " * n + "x\\n",
}
folder = Path(sys.argv[1])
for name, text in cases.items():
    path = folder / name
    path.write_text(text, encoding="utf-8")
    (parse_note if name.endswith(".md") else parse_document)(path)
    print(name, "parsed", flush=True)
"""


def test_long_runs_of_spaces_backticks_or_marks_are_parsed_without_hanging(tmp_path: Path) -> None:
    """Half-megabyte lines that made a heading, code-span, option or answer-heading pattern backtrack
    quadratically (a 20 000 space heading took 10 s; these would take hours). A child process, so that a
    regression fails the test after the guard's minutes instead of hanging the suite."""
    try:
        proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_PATHOLOGICAL), str(tmp_path)], cwd=ROOT,
                              capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired as exc:
        done = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        pytest.fail(f"parsing did not finish; done before the guard: {done!r}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("parsed") == 12, proc.stdout


# --- ingestion -------------------------------------------------------------------------------------------


def _bank(settings: Settings) -> tuple[dict[str, tuple[str, str]], dict[str, tuple[str, str]], str]:
    """Active questions and passages (id -> (file, content hash)) and the live index version."""
    engine = make_engine(settings.db_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            questions = {q.id: (q.document, q.content_hash)
                         for q in session.scalars(select(Question).where(Question.status == ACTIVE))}
            passages = {p.id: (p.note, p.content_hash)
                        for p in session.scalars(select(Passage).where(Passage.status == ACTIVE))}
            state = session.get(BankState, INDEX_VERSION_KEY)
            assert state is not None
            return questions, passages, state.value
    finally:
        engine.dispose()


def _assert_bank_and_index_agree(settings: Settings, encoder: FakeEncoder) -> None:
    questions, passages, version = _bank(settings)
    index = load_index(settings.index_path, version, encoder.model_id, encoder.dim)
    assert {e.question_id for e in index.entries if e.question_id} == set(questions)
    assert {e.passage_id for e in index.entries if e.passage_id} == set(passages)


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Settings, Path]]:
    """The project's documents and notes ingested once (SQLite), and a copy to restore before each example.

    Examples run in the same folder (stored rows name their file by absolute path)."""
    base = tmp_path_factory.mktemp("fuzz-ingest")
    data = base / "data"
    shutil.copytree(SEEDS, data / "raw")
    shutil.copytree(NOTES, data / "notes")
    for name in ("taxonomy.yaml", "annotations.yaml"):
        shutil.copy(ROOT / "data" / name, data / name)
    settings = Settings(data_dir=data, database_url=f"sqlite:///{data / 'tutor.db'}")
    summary = ingest_with(settings, FakeEncoder(), [settings.raw_path, settings.notes_path])
    assert summary.questions == 42 and not summary.skipped
    shutil.copytree(data, base / "snapshot")
    yield settings, base / "snapshot"


targets = st.one_of(
    st.sampled_from(SEED_NAMES).map(lambda n: ("raw", n, _seed(n))),
    st.sampled_from(NOTE_NAMES).map(lambda n: ("notes", n, _note(n))),
    st.tuples(st.just("raw"), st.just("new.txt"), inline_document() | block_document()),
    structured_document().map(lambda d: ("raw", f"new{d[1]}", d[0])),
    note_document().map(lambda t: ("notes", "new.md", t)),
)
"""(folder, file name, text): one of the project's files rewritten, or a new file beside them."""


@_fuzz(16)
@given(target=targets, steps=mutations)
def test_a_damaged_document_never_crashes_ingestion_and_an_unusable_one_keeps_its_questions(
        ingested: tuple[Settings, Path], target: tuple[str, str, str], steps: list[tuple[Any, ...]]) -> None:
    settings, snapshot = ingested
    shutil.rmtree(settings.data_dir)
    shutil.copytree(snapshot, settings.data_dir)
    encoder = FakeEncoder()
    questions, passages, _ = _bank(settings)
    folder, name, text = target
    path = settings.data_dir / folder / name
    data = mutate(text.encode("utf-8"), steps)
    path.write_bytes(data)

    summary = ingest_with(settings, encoder, [settings.raw_path, settings.notes_path])

    _assert_bank_and_index_agree(settings, encoder)
    after_q, after_p, _ = _bank(settings)
    others = {k: v for k, v in questions.items() if v[0] != name}
    assert {k: v for k, v in after_q.items() if v[0] != name} == others  # other documents are untouched
    assert {k: v for k, v in after_p.items() if v[0] != name} == {k: v for k, v in passages.items() if v[0] != name}
    parsed = parse_note(path) if is_note(path) else parse_document(path)
    mine_before = {k: v for k, v in questions.items() if v[0] == name}
    mine = {k: v for k, v in after_q.items() if v[0] == name}
    if not parsed.ok:  # a file that cannot be used keeps what it had
        assert mine == mine_before
        assert {k: v for k, v in after_p.items() if v[0] == name} == {
            k: v for k, v in passages.items() if v[0] == name}
        assert any(i.file == name and i.reason for i in summary.skipped)
    elif isinstance(parsed, NoteResult):  # a usable note: exactly its passages now
        assert {k for k, v in after_p.items() if v[0] == name} == {p.id for p in parsed.passages}
    else:  # a usable document: its questions, and the previous version of each question it skipped
        parsed_ids = {question_id(name, q.text) for q in parsed.questions}
        skipped_ids = {question_id(name, i.question) for i in parsed.issues if i.severity == "skipped" and i.question}
        assert parsed_ids <= set(mine) <= parsed_ids | (skipped_ids & set(mine_before)), parsed.issues


# --- hostile documents on both databases ------------------------------------------------------------------

HOSTILE = {
    # a NUL past the first 8 KB (PostgreSQL refuses NUL in text: it failed the whole ingestion)
    "late_nul.txt": "T\n" + "Question 1: What is a ring all-reduce?\n- a (Correct answer)\n" * 300
                    + "Question 301: what\x00 now\n- b (Correct answer)\n",
    # question numbers past the bank's column, and past Python's int() digit limit
    "big_number.txt": "T\nQuestion 99999999999: What is NCCL?\n- A library (Correct answer)\n"
                      "Question 1: What is NVLink?\n- An interconnect (Correct answer)\n",
    "huge_number.txt": "T\n\nQuestion " + "9" * 5000 + "\n\nWhat is FSDP?\n\nAccepted Answer\n\nSharding\n",
    "big_number.yaml": "questions:\n  - question: What is ZeRO?\n    accepted_answers: [sharding]\n"
                       "    number: 99999999999\n",
    # YAML escapes for NUL and a lone surrogate, an invalid date, a 5000-digit int, deep nesting
    "nul.yaml": 'questions:\n  - question: "What is\\0 this?"\n    accepted_answers: [a]\n',
    "surrogate.yaml": 'questions:\n  - question: "What is \\ud800 this?"\n    accepted_answers: [a]\n',
    "date.yaml": "title: 2020-02-30\nquestions:\n  - question: What is a date?\n    accepted_answers: [a]\n",
    "digits.yaml": "title: " + "9" * 5000 + "\nquestions: []\n",
    "deep.yaml": "questions: " + "[" * 5000 + "\n",
    "nul.md": '---\ntitle: "A\\0 note"\ntopics: [memory]\n---\n\nText.\n',
    "surrogate.md": '---\ntitle: Note\ntopics: ["\\udc80"]\n---\n\nText.\n',
    "date.md": "---\ntitle: Note\ntopics: [memory]\nreferences: [{id: r, authors: A, title: T, year: 2020-13-01}]\n"
               "---\n\nText [r].\n",
    "deep.md": "---\ntitle: Note\ntopics: " + "[" * 5000 + "\n---\n\nText.\n",
}


def test_hostile_documents_are_reported_and_the_bank_keeps_serving(settings: Settings) -> None:
    encoder = FakeEncoder()
    ingest_with(settings, encoder)
    before, _, _ = _bank(settings)
    for name, text in HOSTILE.items():
        (settings.raw_path / name).write_text(text, encoding="utf-8")
    garbage = settings.raw_path / "003_28df717c268ee6dd.txt"  # a bank document overwritten by binary junk
    garbage.write_bytes(garbage.read_bytes()[:9000] + b"\x00\x01\x02" + garbage.read_bytes()[9000:])

    summary = ingest_with(settings, encoder)

    _assert_bank_and_index_agree(settings, encoder)
    after, _, _ = _bank(settings)
    assert before == {k: v for k, v in after.items() if k in before}  # none lost
    assert set(HOSTILE) | {garbage.name} <= {i.file for i in summary.skipped}, summary.skipped
    assert all(i.reason and isinstance(i.line, int) for i in summary.skipped)
    # the usable question beside an unusable number is kept
    assert any(doc == "big_number.txt" for doc, _ in after.values())
