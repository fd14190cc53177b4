"""What a question is for grading (GradingItem) and everything precomputed about it (Rubric)."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from app.grading.align import WeightedStems
from app.grading.lexical import WordModel, model_for
from app.grading.roles import Clause, Role, authored_roles, cues_swapped, parse_sides
from app.grading.text import StemSet, content_stems, has_match

GRADER_VERSION = "grader-1.4"


@dataclass
class GradingItem:
    """A question to grade against: reference answers, wrong answers, examples; no DB types."""

    question: str
    reference_answers: list[str]
    wrong_answers: list[str] = field(default_factory=list)
    explanation: str | None = None
    examples: list[tuple[str, str]] = field(default_factory=list)
    options: list[str] | None = None
    key: str | None = None
    # The sides of a two-sided answer and their words (`{names, cues, implied}`, as in data/roles.yaml),
    # for a question from outside the bank; a bank question's come from data/roles.yaml by its key.
    roles: list[dict[str, Any]] = field(default_factory=list)


# Two questions of a bank whose questions' vectors are at least this near (cosine) ask the same thing: the same
# question in two quiz documents. In the shipped bank one pair does ("What is 'expert parallelism' in the
# context of Mixture-of-Experts (MoE)...", 0.85); the next nearest pairs, 0.70 and 0.65, ask different things
# (`python -m grading_lab.feedback_probe --restated`). Narrower than ingestion's concepts (ingest/concepts.py),
# which link questions on one subject that ask different things ("What is 'ZeRO' ... and which problem does it
# address?" and "What is the ZeRO optimizer and what are its three stages?").
RESTATED = 0.8


@dataclass(frozen=True)
class Neighbours:
    """Every question of a bank by its accepted answers' vectors: what an answer to another question is near."""

    keys: list[str | None]  # the question of each row
    questions: list[str]
    vecs: np.ndarray  # one row per accepted answer of every question
    question_vecs: dict[str | None, np.ndarray] = field(default_factory=dict)  # each question's own vector, by key

    @classmethod
    def of(cls, rubrics: list[Rubric]) -> Neighbours:
        """The neighbours of a whole bank, from its rubrics' accepted-answer vectors."""
        keys, questions, rows = [], [], []
        for rubric in rubrics:
            for vec in rubric.ref_vecs:
                keys.append(rubric.item.key)
                questions.append(rubric.item.question)
                rows.append(vec)
        vecs = np.stack(rows) if rows else np.zeros((0, 1), dtype=np.float32)
        return cls(keys, questions, vecs, {r.item.key: r.question_vec for r in rubrics})

    def restated(self, own: str | None, other: str | None) -> bool:
        """Whether the bank question keyed `other` asks what the one keyed `own` asks (RESTATED)."""
        if own is None or other is None or own == other:
            return False
        mine, theirs = self.question_vecs.get(own), self.question_vecs.get(other)
        return mine is not None and theirs is not None and float(mine @ theirs) >= RESTATED

    def nearest_other(self, vec: np.ndarray, own: str | None) -> tuple[float, str | None, str | None]:
        """The closest accepted answer of another question: its cosine, that question's text and its key."""
        others = [i for i, key in enumerate(self.keys) if key != own]
        if own is None or not others:
            return 0.0, None, None
        sims = self.vecs[others] @ vec
        best = int(np.argmax(sims))
        return float(sims[best]), self.questions[others[best]], self.keys[others[best]]


def attach_neighbours(rubrics: list[Rubric]) -> None:
    """Give each rubric of a bank the bank's neighbours (for the 'answers another question' evidence)."""
    neighbours = Neighbours.of(rubrics)
    for rubric in rubrics:
        rubric.neighbours = neighbours


@dataclass
class Rubric:
    """An item with its vectors, key ideas, role clauses and calibrated offsets. Serialisable."""

    item: GradingItem
    model_id: str
    ref_vecs: np.ndarray
    wrong_vecs: np.ndarray
    example_vecs: np.ndarray
    question_vec: np.ndarray
    expl_vec: np.ndarray | None
    ref_stems: list[WeightedStems]
    wrong_stems: list[WeightedStems]
    vocabulary: StemSet  # stems of the question, accepted answers and explanation (not wrong ones)
    ideas: list[list[str]]  # key ideas per reference answer, in order
    idea_vecs: np.ndarray  # one row per idea, all references' ideas concatenated
    clauses: list[list[Clause]]
    offset_correct: float = 0.0
    offset_partial: float = 0.0
    version: str = GRADER_VERSION
    # The other questions of the rubric's bank (not stored with it: set by `attach_neighbours`).
    neighbours: Neighbours | None = field(default=None, compare=False, repr=False)

    @cached_property
    def wrong_own_stems(self) -> list[list[str]]:
        """Per wrong option, its stems that no accepted answer uses: what stating its claim takes."""
        accepted = {s for ref in self.ref_stems for s in ref.stems}
        return [[s for s in wrong.stems if not has_match(s, accepted)] for wrong in self.wrong_stems]

    @cached_property
    def asked(self) -> StemSet:
        """The question's own stems."""
        return StemSet(content_stems(self.item.question), remember=False)

    @cached_property
    def beyond_question(self) -> StemSet:
        """The stems of the accepted answers and the explanation that no stem of the question matches:
        the words an answer uses to say something the question does not already say."""
        return StemSet({s for s in self.vocabulary if not has_match(s, self.asked)}, remember=False)

    @cached_property
    def material(self) -> StemSet:
        """Every stem of the question's material: the question, its accepted and wrong answers, its
        explanation and its labelled examples. What an answer's opening is checked against
        (app/grading/checks.py: strip_empty_edges)."""
        stems = set(self.vocabulary).union(*(w.stems for w in self.wrong_stems))
        stems.update(s for _, text in self.item.examples for s in content_stems(text))
        return StemSet(stems, remember=False)

    def knows(self, word: str) -> bool:
        """Whether a stem is in the question's material (`material`)."""
        return has_match(word, self.material)

    def goes_beyond(self, word: str) -> bool:
        """Whether a stem is one of the accepted answers' or the explanation's that the question does not hold
        (`beyond_question`)."""
        return has_match(word, self.beyond_question)

    @cached_property
    def roles(self) -> tuple[Role, ...] | None:
        """The sides the role check reads (app/grading/roles.py: cues_swapped), if the question has any."""
        if self.item.roles:
            return parse_sides("roles", self.item.roles)
        return authored_roles().get(self.item.key or "")

    @cached_property
    def swapping_options(self) -> frozenset[str]:
        """The wrong options that give one authored side the other's words (roles.cues_swapped)."""
        roles = self.roles
        if not roles:
            return frozenset()
        return frozenset(w for w in self.item.wrong_answers if cues_swapped(w, roles) is not None)

    @cached_property
    def example_stems(self) -> list[frozenset[str]]:
        """The content stems of each labelled example, in order (the example head's word overlap)."""
        return [frozenset(content_stems(answer)) for answer, _ in self.item.examples]

    @cached_property
    def example_words(self) -> WordModel | None:
        """The classifier of the labelled examples' words (app/grading/lexical.py); None without examples of both
        kinds."""
        return model_for(self.item.examples)

    @cached_property
    def example_lift(self) -> float:
        """How well the labelled examples' own neighbours predict their labels (app/grading/examples.py)."""
        from app.grading.examples import example_lift  # the example head's module imports this one

        return example_lift(self)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict; vectors are base64 float32."""
        item = self.item
        return {
            "version": self.version,
            "model_id": self.model_id,
            "item": {
                "question": item.question,
                "reference_answers": list(item.reference_answers),
                "wrong_answers": list(item.wrong_answers),
                "explanation": item.explanation,
                "examples": [list(e) for e in item.examples],
                "options": None if item.options is None else list(item.options),
                "key": item.key,
                "roles": [dict(side) for side in item.roles],
            },
            "vectors": {
                "ref": _pack(self.ref_vecs),
                "wrong": _pack(self.wrong_vecs),
                "example": _pack(self.example_vecs),
                "ideas": _pack(self.idea_vecs),
                "question": _pack(self.question_vec[None, :]),
                "explanation": None if self.expl_vec is None else _pack(self.expl_vec[None, :]),
            },
            "ref_stems": [[list(w.stems), list(w.weights)] for w in self.ref_stems],
            "wrong_stems": [[list(w.stems), list(w.weights)] for w in self.wrong_stems],
            "vocabulary": sorted(self.vocabulary),
            "ideas": self.ideas,
            "clauses": [[[list(c.subject), list(c.predicate)] for c in cs] for cs in self.clauses],
            "offset_correct": self.offset_correct,
            "offset_partial": self.offset_partial,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Rubric:
        """Rebuild a rubric from `to_dict` output."""
        it = d["item"]
        item = GradingItem(
            question=it["question"],
            reference_answers=list(it["reference_answers"]),
            wrong_answers=list(it.get("wrong_answers") or []),
            explanation=it.get("explanation"),
            examples=[(str(a), str(b)) for a, b in it.get("examples") or []],
            options=None if it.get("options") is None else list(it["options"]),
            key=it.get("key"),
            roles=[dict(side) for side in it.get("roles") or []],
        )
        vec = d["vectors"]
        expl = vec.get("explanation")
        return cls(
            item=item,
            model_id=d["model_id"],
            ref_vecs=_unpack(vec["ref"]),
            wrong_vecs=_unpack(vec["wrong"]),
            example_vecs=_unpack(vec["example"]),
            question_vec=_unpack(vec["question"])[0],
            expl_vec=None if expl is None else _unpack(expl)[0],
            ref_stems=[WeightedStems(tuple(s), tuple(float(x) for x in w)) for s, w in d["ref_stems"]],
            wrong_stems=[WeightedStems(tuple(s), tuple(float(x) for x in w)) for s, w in d["wrong_stems"]],
            vocabulary=StemSet(d["vocabulary"], remember=False),
            ideas=[list(i) for i in d["ideas"]],
            idea_vecs=_unpack(vec["ideas"]),
            clauses=[[Clause(tuple(s), tuple(p)) for s, p in cs] for cs in d["clauses"]],
            offset_correct=float(d.get("offset_correct", 0.0)),
            offset_partial=float(d.get("offset_partial", 0.0)),
            version=d.get("version", GRADER_VERSION),
        )


def _pack(matrix: np.ndarray) -> dict[str, Any]:
    arr = np.ascontiguousarray(matrix, dtype="<f4")
    return {"shape": list(arr.shape), "b64": base64.b64encode(arr.tobytes()).decode("ascii")}


def _unpack(d: dict[str, Any]) -> np.ndarray:
    raw = base64.b64decode(d["b64"])
    return np.frombuffer(raw, dtype="<f4").reshape(d["shape"]).astype(np.float32)
