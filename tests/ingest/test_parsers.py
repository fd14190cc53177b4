"""Every parser on the real seeds and on broken variants."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest.parsers import parse_document
from tests.conftest import SEEDS

SEED_000 = SEEDS / "000_78b4b506bc754b1f.txt"
SEED_001 = SEEDS / "001_d277a1055194c29d.txt"
SEED_002 = SEEDS / "002_1f1c560eb3b82a3f.txt"
SEED_003 = SEEDS / "003_28df717c268ee6dd.txt"


@pytest.mark.parametrize(
    ("path", "layout", "count", "wrong", "explained"),
    [
        (SEED_000, "inline-options", 7, 3, True),
        (SEED_001, "qa-explanation", 5, 0, True),
        (SEED_002, "qa-explanation", 5, 0, True),
        (SEED_003, "qa-distractors", 25, 3, False),
    ],
)
def test_seeds_parse_completely(path: Path, layout: str, count: int, wrong: int, explained: bool) -> None:
    result = parse_document(path)
    assert result.layout == layout
    assert [q.number for q in result.questions] == list(range(1, count + 1))
    assert all(len(q.accepted_answers) == 1 and q.accepted_answers[0] for q in result.questions)
    assert all(len(q.wrong_options) == wrong for q in result.questions)
    assert all((q.explanation is not None) == explained for q in result.questions)
    assert not [i for i in result.issues if i.severity == "skipped"]


def test_seeds_total_42_questions() -> None:
    assert sum(len(parse_document(p).questions) for p in sorted(SEEDS.iterdir())) == 42


def test_inline_layout_fields_and_lines() -> None:
    first = parse_document(SEED_000).questions[0]
    assert first.text == "In pipeline parallelism, what is a 'micro-batch' used for?"
    assert first.accepted_answers == [
        "A smaller batch processed by a single GPU layer to keep all pipeline stages busy"
    ]
    assert "A batch of data sent directly to the CPU for preprocessing" in first.wrong_options
    assert all("(Correct answer)" not in w for w in first.wrong_options)
    assert first.explanation and first.explanation.startswith("Splitting a mini-batch")
    assert (first.line_start, first.line_end) == (2, 8)


def test_trailer_lines_are_not_questions_or_explanations() -> None:
    last = parse_document(SEED_000).questions[-1]
    assert last.explanation is not None
    assert "NCA Multi-GPU" not in last.explanation
    assert "micro-batch" not in last.explanation
    tail = parse_document(SEED_003).questions[-1]
    assert all("Test yourself" not in w for w in tail.wrong_options)
    for q in parse_document(SEED_001).questions:
        assert "Practice Test" not in (q.explanation or "")


def test_distractor_layout_keeps_wrong_options_apart_from_answer() -> None:
    q = parse_document(SEED_003).questions[0]
    assert q.accepted_answers == [
        "Data parallelism replicates the model and splits data; model parallelism splits the model across devices"
    ]
    assert q.wrong_options[0] == "Data parallelism splits the model; model parallelism splits the data"
    assert q.explanation is None


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_inline_question_without_answer_is_reported_with_line(tmp_path: Path) -> None:
    text = SEED_000.read_text(encoding="utf-8")
    broken = text.replace(" (Correct answer)", "", 1).replace(
        "Correct answer: A smaller batch processed by a single GPU layer to keep all pipeline stages busy\n", "", 1
    )
    result = parse_document(_write(tmp_path, "broken.txt", broken))
    assert len(result.questions) == 6
    skipped = [i for i in result.issues if i.severity == "skipped"]
    assert len(skipped) == 1
    assert skipped[0].line == 2 and "no accepted answer" in skipped[0].reason


def test_block_question_without_accepted_answer_is_reported(tmp_path: Path) -> None:
    text = SEED_001.read_text(encoding="utf-8")
    broken = text.replace("Accepted Answer\n\nTensor parallelism for inference\n\n", "", 1)
    result = parse_document(_write(tmp_path, "broken.txt", broken))
    assert [q.number for q in result.questions] == [1, 3, 4, 5]
    (issue,) = [i for i in result.issues if i.severity == "skipped"]
    assert issue.line == 15 and "question 2 has no accepted answer" in issue.reason


def test_unknown_layout(tmp_path: Path) -> None:
    result = parse_document(_write(tmp_path, "notes.txt", "Some lecture notes\n\nNCCL is fast.\n"))
    assert result.layout is None and not result.questions
    assert "unknown layout" in result.issues[0].reason


def test_empty_file(tmp_path: Path) -> None:
    result = parse_document(_write(tmp_path, "empty.txt", "  \n\n"))
    assert result.issues[0].reason == "file is empty"


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "image.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    result = parse_document(path)
    assert result.layout is None and "binary" in result.issues[0].reason


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("Question 1: Qu'est-ce que la r\xe9duction ?\n".encode("latin-1"))
    assert "not UTF-8" in parse_document(path).issues[0].reason


def test_fifty_megabyte_file_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "huge.txt"
    with open(path, "wb") as fh:
        fh.truncate(50 * 1024 * 1024)
    result = parse_document(path)
    assert result.layout is None
    assert "52.4 MB" in result.issues[0].reason and "limit" in result.issues[0].reason


STRUCTURED = """\
title: Collectives
questions:
  - question: What does reduce-scatter leave on each rank?
    accepted_answers: [One disjoint chunk of the reduced result]
    wrong_options: [The full reduced tensor]
    explanation: Reduce-scatter sums across ranks and scatters the result so each rank keeps 1/N of it.
    topics: [collectives]
    notes: [FSDP uses it for gradients.]
    examples:
      - {answer: each rank gets a reduced shard, label: correct}
  - question: A question with no answers
    accepted_answers: []
  - question: What does all-gather do?
    accepted_answers: Every rank ends with the concatenation of all ranks' chunks
"""


def test_structured_bank(tmp_path: Path) -> None:
    result = parse_document(_write(tmp_path, "mine.yaml", STRUCTURED))
    assert result.layout == "structured" and result.title == "Collectives"
    first, second = result.questions
    assert first.wrong_options == ["The full reduced tensor"]
    assert first.topics == ["collectives"] and first.notes == ["FSDP uses it for gradients."]
    assert first.examples[0].label == "correct"
    assert first.line_start == 3
    assert second.accepted_answers == ["Every rank ends with the concatenation of all ranks' chunks"]
    (issue,) = result.issues
    assert issue.line == 11 and "question 2" in issue.reason and "accepted_answers" in issue.reason


def test_structured_json_and_broken_yaml(tmp_path: Path) -> None:
    ok = _write(tmp_path, "b.json", '{"questions": [{"question": "Q?", "accepted_answers": ["A"]}]}')
    assert len(parse_document(ok).questions) == 1
    bad = parse_document(_write(tmp_path, "c.yaml", "questions:\n  - question: [unclosed\n"))
    assert bad.layout is None and "not valid YAML" in bad.issues[0].reason
    shape = parse_document(_write(tmp_path, "d.yaml", "- just a list\n"))
    assert "top-level 'questions'" in shape.issues[0].reason
