"""Role-order check: catches answers that keep the words but swap who does what."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import Any

import yaml

from app.config import DATA_DIR
from app.grading.text import NEGATION_STEMS, NEGATIONS, STOPWORDS, raw_tokens, stem, stems_match

_CLAUSES = re.compile(r"[;.!?\n]+|,\s*|\s+(?:while|whereas|but)\s+|\s+and\s+(?=\w+\s+(?:is|are)\b)")
_SENTENCES = re.compile(r"[;!?\n]+|\.(?=\s|$)|\s+(?:while|whereas|but)\s+|,\s*(?:while|whereas|but)\s+")
_MARKERS = (("instead", "of"), ("rather", "than"), ("than",))
_MARKER_WORDS = frozenset(m[0] for m in _MARKERS)


@dataclass(frozen=True)
class Clause:
    """A clause of a reference answer: its subject and what it says about it."""

    subject: tuple[str, ...]
    predicate: tuple[str, ...]


def _stems(text: str) -> list[str]:
    return [stem(t) for t in raw_tokens(text) if t not in STOPWORDS]


def _subject_of(stems: list[str]) -> tuple[str, ...]:
    if not stems:
        return ()
    if len(stems) > 1 and stems[1].isdigit():
        return (stems[0], stems[1])
    return (stems[0],)


def reference_clauses(reference: str, question: str) -> list[Clause]:
    """Clauses about distinct subjects the question names ('DP ...; MP ...'); needs two or more."""
    asked = set(_stems(question))
    clauses: list[Clause] = []
    for part in _CLAUSES.split(reference):
        stems = _stems(part)
        subject = _subject_of(stems)
        if subject and len(stems) - len(subject) >= 1 and subject[0] in asked:
            clauses.append(Clause(subject, tuple(stems[len(subject) :])))
    subjects = {c.subject for c in clauses}
    if len(subjects) < 2 or len(subjects) != len(clauses) or not _parallel(clauses):
        return []
    return clauses


def _parallel(clauses: list[Clause]) -> bool:
    """Role clauses say comparable things about their subjects ('DP splits data; MP splits the
    model'): every predicate shares a word with another and names no other clause's subject."""
    heads = {c.subject[0] for c in clauses}
    for c in clauses:
        if heads.intersection(c.predicate):
            return False
        others = set().union(*(o.predicate for o in clauses if o is not c))
        if not others.intersection(c.predicate):
            return False
    return True


def _find_subject(stems: list[str], subjects: list[tuple[str, ...]]) -> tuple[int, int]:
    """Index of the first subject mentioned in the stems and where it ends (-1 if none)."""
    for pos in range(len(stems)):
        for k, subj in enumerate(subjects):
            if _at(stems, pos, subj):
                return k, pos + len(subj)
    return -1, 0


def _features(pred: tuple[str, ...] | list[str]) -> set[tuple[str, ...]]:
    uni = {(w,) for w in pred}
    bi = set(pairwise(pred))
    return uni | bi


def _hits(answer_feats: set[tuple[str, ...]], distinct: set[tuple[str, ...]]) -> float:
    score = 0.0
    for feat in distinct:
        if any(len(a) == len(feat) and all(stems_match(x, y) for x, y in zip(a, feat, strict=True))
               for a in answer_feats):
            score += 2.0 if len(feat) == 2 else 1.0
    return score


def clauses_swapped(answer: str, clauses: list[Clause]) -> bool:
    """Whether the answer attributes one subject's predicate to another subject."""
    if len(clauses) < 2:
        return False
    subjects = [c.subject for c in clauses]
    feats = [_features(c.predicate) for c in clauses]
    crossed = confirmed = 0
    for part in _CLAUSES.split(answer):
        stems = _stems(part)
        k, end = _find_subject(stems, subjects)
        if k < 0:
            continue
        pred = _features(stems[end:] + stems[: max(0, end - len(subjects[k]))])
        own = _hits(pred, feats[k] - set().union(*(f for j, f in enumerate(feats) if j != k)))
        other = max(
            _hits(pred, feats[j] - feats[k]) for j in range(len(clauses)) if j != k
        )
        if other > own:
            crossed += 1
        elif own > other:
            confirmed += 1
    return crossed >= 1 and crossed > confirmed


def _marker_sides(text: str) -> list[tuple[set[str], set[str]]]:
    """(left, right) content stems around 'instead of' / 'rather than' / 'than' markers."""
    toks = raw_tokens(text)
    out: list[tuple[set[str], set[str]]] = []
    if _MARKER_WORDS.isdisjoint(toks):  # most texts have no marker: skip the scan
        return out
    for i in range(len(toks)):
        for marker in _MARKERS:
            if tuple(toks[i : i + len(marker)]) != marker:
                continue
            left = [stem(t) for t in toks[max(0, i - 6) : i] if t not in STOPWORDS][-3:]
            right = [stem(t) for t in toks[i + len(marker) : i + len(marker) + 6] if t not in STOPWORDS][:3]
            if left and right:
                out.append((set(left), set(right)))
            break
    return out


def _count(a: set[str], b: set[str]) -> int:
    return sum(1 for x in a if any(stems_match(x, y) for y in b))


def markers_swapped(answer: str, references: list[str]) -> bool:
    """'stores activations instead of recomputing them' against '... recomputing instead of storing'."""
    ans_sides = _marker_sides(answer)
    if not ans_sides:
        return False
    for ref in references:
        for ref_left, ref_right in _marker_sides(ref):
            left_only, right_only = ref_left - ref_right, ref_right - ref_left
            for a_left, a_right in ans_sides:
                cross = _count(a_left, right_only) + _count(a_right, left_only)
                same = _count(a_left, left_only) + _count(a_right, right_only)
                if cross >= 2 and cross > same and _count(a_right, left_only) >= 1:
                    return True
    return False


def roles_swapped(answer: str, references: list[str], clauses: list[list[Clause]]) -> bool:
    """Either check fires: swapped clause subjects or swapped sides of a contrast marker."""
    if any(clauses_swapped(answer, cs) for cs in clauses):
        return True
    return markers_swapped(answer, references)


def subjects_missing(answer: str, clauses: list[list[Clause]]) -> bool:
    """A two-sided reference ('DP ...; MP ...') answered about only some of its subjects."""
    stems = _stems(answer)
    for cs in clauses:
        if not cs:
            continue
        subjects = [c.subject for c in cs]
        found = {k for k in range(len(subjects)) if _find_subject_k(stems, subjects[k])}
        if found and len(found) < len(subjects):
            return True
    return False


def _find_subject_k(stems: list[str], subject: tuple[str, ...]) -> bool:
    return _find_subject(stems, [subject])[0] >= 0


# Authored roles: for a bank question whose answer gives two subjects different roles (sync and async
# SGD, DataParallel and DDP, bf16 and fp16), the words that belong to each side, so that a swap
# written in other words than the accepted answer's ("sync SGD: workers push whenever they finish")
# is still seen. The authoring data is data/roles.yaml, keyed by question id.
ROLES_PATH = DATA_DIR / "roles.yaml"
# Words that reverse or deny what follows them: a segment holding one says what its subject does *not*
# do, so its cues say nothing about the roles ("async SGD does not wait", "DDP avoids the GIL").
_DENIALS = NEGATIONS | {"unlike", "instead", "rather", "less", "fewer", "lower", "nobody", "noone", "cannot", "t"}
_DENIAL_STEMS = (*NEGATION_STEMS, "overcom", "solv", "fix", "sidestep", "escap", "reduc", "cut", "minimi",
                 "mitigat", "limit")


@dataclass(frozen=True)
class Role:
    """One side of a two-sided answer: the names of its subject and the words that go with it."""

    name: str
    names: tuple[tuple[str, ...], ...]  # stem sequences, stopwords kept
    cues: tuple[tuple[str, ...], ...]
    implied: bool = False  # the side an answer that names no side speaks of (the question's own subject)


def _phrase(text: str) -> tuple[str, ...]:
    return tuple(stem(t) for t in raw_tokens(text))


MAX_SIDES = 8


def parse_sides(where: str, raw_sides: list[dict[str, Any]]) -> tuple[Role, ...]:
    """The sides of one question (each `{names, cues, implied}`, as in data/roles.yaml): two to
    MAX_SIDES of them, every name and cue with a word in it, at most one side implied, and no cue or
    name on two sides. A ValueError says what is wrong."""
    if not 2 <= len(raw_sides) <= MAX_SIDES:
        raise ValueError(f"{where}: roles need two to {MAX_SIDES} sides")
    sides = []
    for raw in raw_sides:
        names = tuple(_phrase(str(n)) for n in raw.get("names") or [])
        cues = tuple(_phrase(str(c)) for c in raw.get("cues") or [])
        if not names or not cues:
            raise ValueError(f"{where}: every side needs at least one name and one cue")
        if not all(names) or not all(cues):
            raise ValueError(f"{where}: every name and cue needs a word in it")
        sides.append(Role(str(raw["names"][0]), names, cues, bool(raw.get("implied", False))))
    if sum(side.implied for side in sides) > 1:
        raise ValueError(f"{where}: at most one side is implied")
    for i, a in enumerate(sides):
        for b in sides[i + 1 :]:
            shared = set(a.cues) & set(b.cues) | set(a.names) & set(b.names)
            if shared:
                raise ValueError(f"{where}: {a.name!r} and {b.name!r} share {sorted(' '.join(x) for x in shared)}")
    return tuple(sides)


def parse_roles(raw: dict[str, Any]) -> dict[str, tuple[Role, ...]]:
    """The authored roles by question id (data/roles.yaml), each question's sides as `parse_sides` reads them."""
    return {str(entry["id"]): parse_sides(str(entry["id"]), list(entry["roles"])) for entry in raw.get("questions", [])}


@lru_cache(maxsize=1)
def authored_roles() -> dict[str, tuple[Role, ...]]:
    """data/roles.yaml, read once; no file means no authored roles."""
    if not ROLES_PATH.exists():
        return {}
    return parse_roles(yaml.safe_load(ROLES_PATH.read_text(encoding="utf-8")) or {})


def _at(stems: list[str], pos: int, phrase: tuple[str, ...]) -> bool:
    window = stems[pos : pos + len(phrase)]
    return len(window) == len(phrase) and all(stems_match(a, b) for a, b in zip(window, phrase, strict=True))


def _mentions(stems: list[str], roles: tuple[Role, ...]) -> list[tuple[int, int, int]]:
    """(start, end, side) of every name of a side, left to right, longest name first."""
    out: list[tuple[int, int, int]] = []
    pos = 0
    while pos < len(stems):
        best = max(((len(n), k) for k, r in enumerate(roles) for n in r.names if _at(stems, pos, n)), default=None)
        if best is None:
            pos += 1
            continue
        out.append((pos, pos + best[0], best[1]))
        pos += best[0]
    return out


def _cue_hits(stems: list[str], cues: tuple[tuple[str, ...], ...]) -> list[tuple[int, int]]:
    """(start, end) of each cue found in a segment."""
    return [(p, p + len(c)) for c in cues for p in range(len(stems)) if _at(stems, p, c)]


# A name right after these words is what its subject is compared with ("bf16 has fewer exponent bits
# than fp16 so it overflows"), not a new subject: the words after it still go with the subject.
# "Over" and "ahead of" too ("preferred over Gloo", "ahead of the slow ones"), and "then" after a
# comparative, as learners often write "than".
_COMPARED = (("than",), ("over",), ("vs",), ("versus",), ("compared", "to"), ("compared", "with"),
             ("relative", "to"), ("ahead", "of"), ("behind",))
_COMPARATIVES = frozenset({"more", "less", "better", "worse", "faster", "slower", "wider", "narrower", "larger",
                           "smaller", "bigger", "higher", "lower", "fewer", "greater", "safer", "stabler"})
# A first name right after these words is where something goes or comes from, not who does it: the
# words before it are not said of it ("broadcast sends the tensor to every rank"; `_acted_on`).
_DESTINATIONS = frozenset({"to", "from", "onto", "into", "across", "among", "between", "on"})


def _compared(toks: list[str], start: int) -> bool:
    if start >= 1 and toks[start - 1] in ("the", "a", "an"):
        start -= 1
    if start >= 2 and toks[start - 1] == "then" and toks[start - 2] in _COMPARATIVES:
        return True
    return any(tuple(toks[max(start - len(c), 0) : start]) == c for c in _COMPARED)


def _acted_on(toks: list[str], stems: list[str], roles: tuple[Role, ...], start: int) -> bool:
    """Whether the name at `start` is where something goes ("to every rank") or what a cue just before
    it acts on ("sends each rank a chunk"): then the words before it are not said of it."""
    if not start:
        return False
    if toks[start - 1] in _DESTINATIONS:
        return True
    return any(start >= len(c) and _at(stems, start - len(c), c) for r in roles for c in r.cues)


def _segments(toks: list[str], stems: list[str], roles: tuple[Role, ...], named: list[tuple[int, int, int]],
              implied: int | None) -> list[tuple[int, list[int]]]:
    """(side, word positions) of what a sentence says of each side it names (`named`: its `_mentions`);
    the whole sentence for the implied side when the answer names no side (`implied`)."""
    if implied is not None:
        return [(implied, list(range(len(stems))))]
    mentions = [m for m in named if not _compared(toks, m[0])]
    out = []
    for i, (start, end, side) in enumerate(mentions):
        stop = mentions[i + 1][0] if i + 1 < len(mentions) else len(stems)
        lead = start if i == 0 and not _acted_on(toks, stems, roles, start) else 0  # the words before
        out.append((side, [*range(lead), *range(end, stop)]))
    return out


@dataclass(frozen=True)
class RoleSwap:
    """What a swap rests on: the side the answer named, and the other side's word it gave it."""

    said_of: str
    belongs_to: str
    cue: str


Reading = tuple[int, list[str], dict[int, list[tuple[int, int]]]]  # side, segment words, each side's cue spans


def _readings(answer: str, roles: tuple[Role, ...]) -> Iterator[Reading]:
    """Per segment of the answer that says something of one side (`cues_swapped` tells how it is cut):
    that side, the segment's words and where each side's cues are in it. A segment with a denial
    outside its cues is left out."""
    sentences = [raw_tokens(part) for part in _SENTENCES.split(answer)]
    stemmed = [[stem(t) for t in toks] for toks in sentences]
    parts = [(toks, stems, _mentions(stems, roles)) for toks, stems in zip(sentences, stemmed, strict=True)]
    implied = next((k for k, r in enumerate(roles) if r.implied), None)
    if implied is not None and any(named for _, _, named in parts):
        implied = None
    for toks, stems, named in parts:
        for side, positions in _segments(toks, stems, roles, named, implied):
            seg, seg_toks = [stems[p] for p in positions], [toks[p] for p in positions]
            hits = {k: _cue_hits(seg, r.cues) for k, r in enumerate(roles)}
            in_cue = {p for spans in hits.values() for a, b in spans for p in range(a, b)}
            if any((t in _DENIALS or s.startswith(_DENIAL_STEMS)) and p not in in_cue
                   for p, (t, s) in enumerate(zip(seg_toks, seg, strict=True))):
                continue
            yield side, seg_toks, hits


def cues_swapped(answer: str, roles: tuple[Role, ...]) -> RoleSwap | None:
    """Whether the answer gives one side the other side's words and no side its own.

    Each sentence (or each side of a 'while' / 'whereas' / 'but') is cut at the names of the sides;
    the words from a name up to the next name are what the answer says of that side (the words before
    the first name go with it, unless it follows "to", "from" or a cue that acts on it; a name after
    "than" or "compared to" does not cut). An answer that names no side speaks of the implied side,
    where the question has one. A segment with a denial ("not", "avoids", "unlike") outside its cues
    is left out. A segment is crossed when it holds only another side's cues, confirmed when it holds
    only its own.
    """
    return read_roles(answer, roles).swap


def cues_confirmed(answer: str, roles: tuple[Role, ...]) -> bool:
    """Whether the answer gives some side its own words and no side another's: it cannot be stating a
    swap of the roles ("DP copies the model and splits data; MP splits the model")."""
    return read_roles(answer, roles).confirmed


def cues_stated(answer: str, roles: tuple[Role, ...]) -> bool:
    """Whether the answer gives every side its own words and no side another's: it states the relation
    the question asks about, side by side ("DP keeps a full copy of the model on each GPU and splits the
    batch; MP splits the model's layers across GPUs")."""
    return read_roles(answer, roles).stated


@dataclass(frozen=True)
class RoleReading:
    """What the role checks read in one answer: a swap (`cues_swapped`), whether the answer is
    confirmed (`cues_confirmed`) and whether it states every side (`cues_stated`)."""

    swap: RoleSwap | None = None
    confirmed: bool = False
    stated: bool = False


def read_roles(answer: str, roles: tuple[Role, ...]) -> RoleReading:
    """`cues_swapped`, `cues_confirmed` and `cues_stated` of one answer, its segments read once."""
    if len(roles) < 2:
        return RoleReading()
    crossed: RoleSwap | None = None
    own: set[int] = set()  # the sides that some segment gives only their own cues
    clean = True  # no segment holds another side's cues
    for side, seg_toks, hits in _readings(answer, roles):
        others = [(k, span) for k, spans in hits.items() if k != side for span in spans]
        if hits[side] and not others:
            own.add(side)
        if others:
            clean = False
            if not hits[side] and crossed is None:
                k, (a, b) = others[0]
                crossed = RoleSwap(roles[side].name, roles[k].name, " ".join(seg_toks[a:b]))
    return RoleReading(None if own else crossed, bool(own) and clean, len(own) == len(roles) and clean)
