"""Study notes: Markdown files with YAML front matter, split into passages that can be cited.

A note (`data/notes/*.md`, or any `.md` file given to `tutor ingest`) looks like:

    ---
    title: Data parallelism
    topics: [data-parallelism]
    references:
      - {id: li2020pytorch, authors: Shen Li et al., title: "PyTorch Distributed", year: 2020, where: arXiv:2006.15704}
    explains:
      - {file: 003_28df717c268ee6dd.txt, number: 5, section: "Splitting the data with DistributedSampler"}
    asks:
      - section: "Splitting the data with DistributedSampler"
        questions: ["how does each gpu get different samples?", "why call set_epoch every epoch"]
    ---

    ## Splitting the data with DistributedSampler

    Every rank builds the same list of indices ... [li2020pytorch, §3.2].

The body is split at its headings, then into paragraphs (blank-line separated; a fenced code
block stays whole). Each paragraph is a passage that keeps the note's file name, its heading path
and its line span. Body text cites references as `[refid]`, `[refid, §2.1]` or `[a; b, §3]`
(inside `code` nothing is a citation). An `explains` entry names a bank question (seed file and
question number) and the heading of the section that explains its answer; that section's passages,
its subsections' included, explain the question. An `asks` entry lists questions, as learners word
them, that a section's own text answers; they are kept on the section's first passage, and the ask
path matches a learner's question against them (app/ask/).

A note that cannot be used is reported with file, line and reason, every problem at once:
front matter that is missing or not YAML, no title or topics, a reference without authors or
organisation, title and year or version, a citation of an id not in `references`, an `explains`
entry without file, number and section, or whose section is not a heading of the note, an `asks`
entry without a section and a list of questions, or whose section is not a heading.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.reader import ReaderError

from ingest.cleaning import clean
from ingest.identity import content_hash
from ingest.parsers.base import ParseIssue, line_of_offset, split_lines, unstorable

NOTE_SUFFIXES = frozenset({".md"})
MAX_NOTE_BYTES = 2 * 1024 * 1024
LAYOUT = "note"

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
# The closing #s of a heading are cut in code (`_heading_text`): in the pattern, a lazy text followed by an
# optional `\s+#+` and `\s*$` tried every split of a run of spaces (a 20 000-space heading took 10 s).
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.+)$")
_TICKS = re.compile(r"`+")
_BRACKET = re.compile(r"\[([^\[\]\n]+)\](?![(\[])")
_CITE_ID = re.compile(r"^[A-Za-z][\w.:/+-]*$")


def is_note(path: Path) -> bool:
    """Whether a file is a study note rather than a quiz document."""
    return path.suffix.lower() in NOTE_SUFFIXES


def passage_id(note: str, heading_path: list[str], text: str, occurrence: int = 0) -> str:
    """Id from the note's file name, the heading path and the normalised text, independent of position."""
    key = f"{note}\n{' > '.join(heading_path)}\n{clean(text).casefold()}"
    if occurrence:
        key += f"\n#{occurrence}"
    return "p_" + hashlib.sha256(key.encode()).hexdigest()[:12]


def passage_embed_text(title: str, heading_path: list[str], text: str) -> str:
    """A passage's embedded text: "title: heading > heading" on the first line, then the paragraph."""
    return f"{title}: {' > '.join(heading_path)}\n{text}"


@dataclass(frozen=True)
class Explains:
    """One `explains` entry: a bank question (seed file + number) and the note's section for it."""

    file: str
    number: int
    section: str
    line: int


@dataclass(frozen=True)
class Asks:
    """One `asks` entry: questions that a section of the note answers, as learners word them."""

    section: str
    questions: tuple[str, ...]
    line: int


MAX_ASK_CHARS = 300  # an authored question longer than this is a paragraph, not a question


@dataclass
class PassageRecord:
    """Everything stored about one passage, before it meets the database."""

    id: str
    note: str
    source_path: str
    title: str
    topics: list[str]
    heading_path: list[str]
    position: int
    line_start: int
    line_end: int
    text: str
    citations: list[dict[str, Any]] = field(default_factory=list)
    explains: list[dict[str, Any]] = field(default_factory=list)
    asks: list[str] = field(default_factory=list)  # questions this passage's section answers

    @property
    def embed_text(self) -> str:
        """What the index embeds for this passage: its note's title and headings, then its text, so a
        paragraph that never names its subject is still found by it."""
        return passage_embed_text(self.title, self.heading_path, self.text)

    @property
    def content_hash(self) -> str:
        """Hash of the stored fields (lines and headings count: citations use them)."""
        return content_hash(asdict(self))


@dataclass
class NoteResult:
    """The passages of one note, its links to bank questions, and what was wrong with it."""

    path: Path
    title: str | None = None
    passages: list[PassageRecord] = field(default_factory=list)
    explains: list[Explains] = field(default_factory=list)
    asks: list[Asks] = field(default_factory=list)
    issues: list[ParseIssue] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the note can be used; otherwise the passages held before for it stay."""
        return not any(i.severity == "skipped" for i in self.issues)


class NoteError(Exception):
    """The note cannot be read at all; the message says why."""

    def __init__(self, reason: str, line: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


def parse_note(path: Path, max_bytes: int = MAX_NOTE_BYTES) -> NoteResult:
    """Parse one note; a note with any problem comes back with its issues and no passages."""
    try:
        text = _read(path, max_bytes)
        result = _parse(path, text)
    except NoteError as exc:
        return NoteResult(path, issues=[ParseIssue(path.name, exc.line, exc.reason)])
    except OSError as exc:
        return NoteResult(path, issues=[ParseIssue(path.name, 0, f"cannot read: {exc}")])
    if not result.ok:
        result.passages, result.explains = [], []
    return result


def _read(path: Path, max_bytes: int) -> str:
    size = path.stat().st_size
    if size > max_bytes:
        raise NoteError(f"file is {size / 1e6:.1f} MB, over the {max_bytes / 1e6:.1f} MB limit for a note")
    data = path.read_bytes()
    if not data.strip():
        raise NoteError("file is empty")
    if (nul := data.find(b"\x00")) >= 0:  # anywhere: PostgreSQL refuses NUL in text
        raise NoteError("file is binary (it holds a NUL byte), not a Markdown note", line_of_offset(data, nul))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise NoteError(
            f"file is not UTF-8 text (bad byte at offset {exc.start})", line_of_offset(data, exc.start)
        ) from exc
    return text.replace("\ufeff", "")  # a BOM inside (files joined with `cat`) hid a heading or the '---'


# --- front matter ---------------------------------------------------------------------------------


def _front_matter(lines: list[str]) -> tuple[Any, Any, int]:
    """(data, YAML node, index of the closing line); front matter starts on line 1 with '---'."""
    if not lines or lines[0].strip() != "---":
        raise NoteError("no YAML front matter: a note starts with a '---' line, then title, topics, references", 1)
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        raise NoteError("front matter is not closed by a '---' line", 1)
    source = "\n".join(lines[1:end])
    loader: yaml.SafeLoader | None = None
    try:
        loader = yaml.SafeLoader(source)  # refuses control characters at once (a ReaderError)
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except ReaderError as exc:
        raise NoteError(f"front matter is not valid YAML: character #x{exc.character:04x} is not allowed",
                        line_of_offset(source, exc.position) + 1) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise NoteError(f"front matter is not valid YAML: {problem}", mark.line + 2 if mark else 1) from exc
    except RecursionError as exc:
        raise NoteError("front matter is not valid YAML: nested too deeply", 2) from exc
    except ValueError as exc:
        # A value that looks like a date or an integer but is none (2020-13-01, an integer past Python's
        # int() digit limit): PyYAML raises ValueError, not a YAML error.
        raise NoteError(f"front matter is not valid YAML: a value cannot be read ({str(exc)[:120]})", 2) from exc
    finally:
        if loader is not None:
            loader.dispose()
    if not isinstance(data, dict):
        raise NoteError("front matter is not a mapping of fields (title, topics, references, explains)", 2)
    return data, node, end


def _unstorable_in(value: Any) -> str | None:
    """Why some text in a front-matter value cannot be stored (YAML escapes can write a NUL or a lone
    surrogate), or None. Aliases may make the value cyclic: each container is visited once."""
    seen: set[int] = set()
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            if why := unstorable(item):
                return why
        elif isinstance(item, (dict, list, set, frozenset, tuple)) and id(item) not in seen:
            seen.add(id(item))
            todo.extend([*item.keys(), *item.values()] if isinstance(item, dict) else item)
    return None


def _value_node(node: Any, key: str) -> Any:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if getattr(k, "value", None) == key:
                return v
    return None


def _line_of(node: Any, key: str, default: int = 2) -> int:
    """The file line of a front-matter key (the front matter's first line is line 2 of the file)."""
    if isinstance(node, yaml.MappingNode):
        for k, _ in node.value:
            if getattr(k, "value", None) == key:
                return int(k.start_mark.line) + 2
    return default


def _item_lines(node: Any, key: str, count: int) -> list[int]:
    value = _value_node(node, key)
    if isinstance(value, yaml.SequenceNode) and len(value.value) == count:
        return [int(item.start_mark.line) + 2 for item in value.value]
    return [_line_of(node, key)] * count


def _text(value: Any) -> str | None:
    """A non-empty scalar as text (YAML reads `year: 2020` as an int), else None."""
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
        return None
    text = str(value).strip()
    return text or None


def _names(value: Any) -> str | None:
    """Authors as one string: a string, or a list of names joined by commas."""
    if isinstance(value, list):
        names = [n for n in (_text(v) for v in value) if n]
        return ", ".join(names) or None
    return _text(value)


def _references(data: dict[str, Any], node: Any, name: str, issues: list[ParseIssue]) -> dict[str, dict[str, Any]]:
    raw = data.get("references") or []
    if not isinstance(raw, list):
        issues.append(ParseIssue(name, _line_of(node, "references"), "references is not a list"))
        return {}
    refs: dict[str, dict[str, Any]] = {}
    for n, (item, line) in enumerate(zip(raw, _item_lines(node, "references", len(raw)), strict=True), 1):
        if not isinstance(item, dict) or not _text(item.get("id")):
            issues.append(ParseIssue(name, line, f"reference {n} has no id"))
            continue
        rid = str(_text(item.get("id")))
        if rid in refs:
            issues.append(ParseIssue(name, line, f"reference '{rid}' appears twice"))
            continue
        ref: dict[str, Any] = {"id": rid}
        authors, organisation = _names(item.get("authors")), _text(item.get("organisation"))
        if authors:
            ref["authors"] = authors
        if organisation:
            ref["organisation"] = organisation
        if not (authors or organisation):
            issues.append(ParseIssue(name, line, f"reference '{rid}' has no authors or organisation"))
        title = _text(item.get("title"))
        if title:
            ref["title"] = title
        else:
            issues.append(ParseIssue(name, line, f"reference '{rid}' has no title"))
        year, version = _text(item.get("year")), _text(item.get("version"))
        if year:
            ref["year"] = year
        if version:
            ref["version"] = version
        if not (year or version):
            issues.append(ParseIssue(name, line, f"reference '{rid}' has no year or version"))
        where = _text(item.get("where"))
        if where:
            ref["where"] = where
        refs[rid] = ref
    return refs


def _listed(data: dict[str, Any], node: Any, name: str, key: str, issues: list[ParseIssue]) -> list[tuple[Any, int]]:
    """A front-matter list's items, each with its line (none, and an issue, when it is not a list)."""
    raw = data.get(key) or []
    if not isinstance(raw, list):
        issues.append(ParseIssue(name, _line_of(node, key), f"{key} is not a list"))
        return []
    return list(zip(raw, _item_lines(node, key, len(raw)), strict=True))


def _explains(data: dict[str, Any], node: Any, name: str, issues: list[ParseIssue]) -> list[Explains]:
    out = []
    for item, line in _listed(data, node, name, "explains", issues):
        file = _text(item.get("file")) if isinstance(item, dict) else None
        number = item.get("number") if isinstance(item, dict) else None
        section = _text(item.get("section")) if isinstance(item, dict) else None
        if not file or not section or isinstance(number, bool) or not isinstance(number, int) or number < 1:
            issues.append(
                ParseIssue(name, line, "explains entry needs file (a seed file name), number (>= 1) and section")
            )
            continue
        out.append(Explains(file, number, section, line))
    return out


def _asks(data: dict[str, Any], node: Any, name: str, issues: list[ParseIssue]) -> list[Asks]:
    out = []
    for item, line in _listed(data, node, name, "asks", issues):
        section = _text(item.get("section")) if isinstance(item, dict) else None
        questions = item.get("questions") if isinstance(item, dict) else None
        texts = [_text(q) for q in questions] if isinstance(questions, list) else []
        if not section or not texts or not all(texts):
            issues.append(ParseIssue(name, line, "asks entry needs section and a list of questions (text)"))
            continue
        if any(len(t or "") > MAX_ASK_CHARS for t in texts):
            issues.append(ParseIssue(name, line, f"asks entry has a question over {MAX_ASK_CHARS} characters"))
            continue
        out.append(Asks(section, tuple(t for t in texts if t), line))
    return out


# --- body -----------------------------------------------------------------------------------------


@dataclass
class _Block:
    heading_path: list[str]
    line_start: int
    line_end: int
    lines: list[str]
    code: bool = False

    @property
    def text(self) -> str:
        return "\n".join(self.lines).strip()


def _blocks(lines: list[str], first: int) -> tuple[list[_Block], list[tuple[list[str], int]]]:
    """Paragraphs under their headings, and every heading (its path and line); `first` is the file
    line number of lines[0]."""
    blocks: list[_Block] = []
    headings: list[tuple[list[str], int]] = []
    path: list[tuple[int, str]] = []
    current: _Block | None = None
    fence: str | None = None
    for no, line in enumerate(lines, first):
        if fence is not None:
            assert current is not None
            current.lines.append(line)
            current.line_end = no
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence, current = None, None
            continue
        opening = _FENCE.match(line)
        heading = None if opening else _HEADING.match(line)
        if opening or heading or not line.strip():
            current = None
        if opening:
            fence = opening.group(1)
            current = _Block([h for _, h in path], no, no, [line], code=True)
            blocks.append(current)
        elif heading:
            level, text = len(heading.group(1)), _heading_text(heading.group(2))
            while path and path[-1][0] >= level:
                path.pop()
            path.append((level, text))
            headings.append(([h for _, h in path], no))
        elif line.strip():
            if current is None:
                current = _Block([h for _, h in path], no, no, [])
                blocks.append(current)
            current.lines.append(line)
            current.line_end = no
    return blocks, headings


def _heading_text(raw: str) -> str:
    """A heading's text without its closing sequence of #s (kept when no space comes before it: "C#")."""
    text = raw.strip()
    bare = text.rstrip("#")
    return bare.rstrip() if bare != text and bare and bare[-1].isspace() else text


def _blank_code_spans(text: str) -> str:
    """Text with its code spans (a run of backticks up to the next run of the same length) blanked out,
    line breaks kept; linear in the length (a backtracking pattern took seconds on a few thousand backticks)."""
    runs = [(m.start(), m.end()) for m in _TICKS.finditer(text)]
    later: dict[int, list[int]] = {}  # run length -> indexes of the runs of that length, last first
    for i in range(len(runs) - 1, -1, -1):
        later.setdefault(runs[i][1] - runs[i][0], []).append(i)
    pieces, done, i = [], 0, 0
    while i < len(runs):
        start, end = runs[i]
        same = later[end - start]
        while same and same[-1] <= i:
            same.pop()
        if same:
            close = runs[same[-1]][1]
            pieces += [text[done:start], re.sub(r"[^\n]", " ", text[start:close])]
            done, i = close, same[-1] + 1
        else:
            i += 1
    pieces.append(text[done:])
    return "".join(pieces)


def _citations(
    block: _Block, refs: dict[str, dict[str, Any]], name: str, issues: list[ParseIssue]
) -> list[dict[str, Any]]:
    """The references a paragraph cites, in order of first citation, with the locators used."""
    if block.code:
        return []
    text = _blank_code_spans("\n".join(block.lines))
    cited: dict[str, dict[str, Any]] = {}
    for match in _BRACKET.finditer(text):
        line = block.line_start + text.count("\n", 0, match.start())
        for part in match.group(1).split(";"):
            rid, _, locator = (s.strip() for s in part.partition(","))
            if not _CITE_ID.match(rid):
                continue  # not a citation: "[ ]", "[0, 1]", "[see below]"
            if rid not in refs:
                issues.append(ParseIssue(name, line, f"cites [{rid}], which is not in references"))
                continue
            entry = cited.setdefault(rid, {**refs[rid], "locators": []})
            if locator and locator not in entry["locators"]:
                entry["locators"].append(locator)
    return list(cited.values())


def _parse(path: Path, text: str) -> NoteResult:
    name = path.name
    lines = split_lines(text)
    data, node, end = _front_matter(lines)
    result = NoteResult(path)
    issues = result.issues
    for key, value in data.items():
        if why := _unstorable_in(key) or _unstorable_in(value):
            issues.append(ParseIssue(name, _line_of(node, str(key)), f"front matter field {key!r} holds {why}"))
    if not result.ok:  # nothing more is read from such front matter: its text would reach messages
        return result
    title = _text(data.get("title"))
    if not title:
        issues.append(ParseIssue(name, _line_of(node, "title"), "front matter has no title"))
    raw_topics = data.get("topics")
    topics = [t for t in (_text(x) for x in (raw_topics if isinstance(raw_topics, list) else [raw_topics])) if t]
    if not topics:
        issues.append(ParseIssue(name, _line_of(node, "topics"), "front matter has no topics"))
    refs = _references(data, node, name, issues)
    result.explains = _explains(data, node, name, issues)
    result.asks = _asks(data, node, name, issues)
    result.title = title

    blocks, headings = _blocks(lines[end + 1 :], end + 2)
    if not blocks:
        issues.append(ParseIssue(name, end + 2, "the note has no text under its front matter"))
    sections: dict[str, list[list[str]]] = {}
    for heading_path, _ in headings:
        sections.setdefault(heading_path[-1], []).append(heading_path)
    explained: dict[int, list[dict[str, Any]]] = {}
    for entry in result.explains:
        if entry.section not in sections:
            reason = f"explains section '{entry.section}' is not a heading of this note"
            issues.append(ParseIssue(name, entry.line, reason))
            continue
        for i, block in enumerate(blocks):
            if any(block.heading_path[: len(hp)] == hp for hp in sections[entry.section]):
                link = {"file": entry.file, "number": entry.number}
                if link not in explained.setdefault(i, []):
                    explained[i].append(link)
    asked: dict[int, list[str]] = {}
    for ask in result.asks:
        if ask.section not in sections:
            issues.append(ParseIssue(name, ask.line, f"asks section '{ask.section}' is not a heading of this note"))
            continue
        first = next((i for i, block in enumerate(blocks)
                      if any(block.heading_path[: len(hp)] == hp for hp in sections[ask.section])), None)
        if first is None:
            issues.append(ParseIssue(name, ask.line, f"asks section '{ask.section}' has no text"))
            continue
        for question in ask.questions:
            if question not in asked.setdefault(first, []):
                asked[first].append(question)

    seen: dict[str, int] = {}
    for i, block in enumerate(blocks):
        citations = _citations(block, refs, name, issues)
        base = passage_id(name, block.heading_path, block.text)
        occurrence = seen.get(base, 0)
        seen[base] = occurrence + 1
        result.passages.append(
            PassageRecord(
                id=passage_id(name, block.heading_path, block.text, occurrence),
                note=name,
                source_path=str(path.resolve()),
                title=title or "",
                topics=topics,
                heading_path=block.heading_path,
                position=i,
                line_start=block.line_start,
                line_end=block.line_end,
                text=block.text,
                citations=citations,
                explains=explained.get(i, []),
                asks=asked.get(i, []),
            )
        )
    return result
