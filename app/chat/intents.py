"""What a learner means: typo-tolerant phrase matching plus embedding similarity to example phrasings."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import numpy as np

from app.chat.text import content, normalise, phrase_score
from app.chat.vocab import Found, Vocabulary
from ingest.embedder import Encoder

QUIZ, HARDER, HINT, EXPLAIN, SKIP = "quiz", "harder", "hint", "explain", "skip"
DEMO, PROGRESS, HELP, ASK, ANSWER = "demo", "progress", "help", "ask", "answer"

# A few ways of saying each command; typos and paraphrases are matched against these.
EXEMPLARS: dict[str, tuple[str, ...]] = {
    QUIZ: (
        "quiz me", "test me", "ask me a question", "give me a question", "start a quiz", "let's do a quiz",
        "test my knowledge", "I want to practice", "next question", "another question", "more questions",
        "keep going", "continue the quiz", "practise", "practice", "quiz me on a topic", "drill me", "examine me",
    ),
    HARDER: (
        "harder", "give me something harder", "a harder question", "make it harder", "more difficult",
        "this is too easy", "challenge me", "tougher question", "a tougher one", "level up",
        "something more challenging",
    ),
    HINT: (
        "hint", "give me a hint", "can I have a hint", "I need a hint", "clue", "give me a clue", "help me out",
        "any tips", "a little help", "nudge me", "I'm stuck",
    ),
    EXPLAIN: (
        "why", "why is that", "explain", "explain that", "explain it", "explain the answer", "why was I wrong",
        "tell me why", "how come", "what is the explanation", "elaborate", "what does that mean", "why is it right",
    ),
    SKIP: (
        "skip", "skip this one", "skip this question", "pass", "next one", "I don't know", "no idea",
        "I give up", "show me the answer", "tell me the answer", "move on", "don't know",
    ),
    DEMO: (
        "show me", "show me a demo", "run the demo", "run a demo", "demo", "can I see it in action",
        "visualize it", "run an experiment", "simulate it", "let me see it", "launch the demo",
        "show me how it works", "run it", "start the demo", "show me it in action", "see a demo",
    ),
    PROGRESS: (
        "how am I doing", "my progress", "show my progress", "how well am I doing", "stats", "my stats",
        "my score", "what's my score", "what should I review", "what is due", "how far am I",
        "report card", "how is my progress", "my mastery",
    ),
    HELP: ("hi", "hello", "hey there", "help", "what can you do", "how does this work", "thanks", "thank you"),
}
SLOTTED = (QUIZ, HARDER, DEMO, PROGRESS)  # kinds scored on the message without the topic/demo words
ACCEPT = 0.74  # below this no command is confident enough, and the message is an answer or a question
_QUESTION_START = re.compile(
    r"^\s*(what|what's|whats|how|why|when|which|who|where|explain|define|describe|compare|tell me about|"
    r"difference|is there|can you explain)\b",
    re.IGNORECASE,
)
_LETTER = re.compile(r"^\s*(?:option\s+|answer\s+|it'?s\s+|i\s+think\s+)?\(?([a-hA-H])\)?[.)]?\s*$")


@dataclass
class Intent:
    """A recognised intent with its slots and how sure the recogniser is."""

    kind: str
    score: float = 0.0
    topic: str | None = None
    demo: str | None = None
    unknown_topic: str | None = None
    choice: str | None = None


class IntentModel:
    """Example phrasings, with their vectors when an encoder is given."""

    def __init__(self, encoder: Encoder | None = None) -> None:
        self.kinds = [kind for kind, phrases in EXEMPLARS.items() for _ in phrases]
        phrases = [p for ps in EXEMPLARS.values() for p in ps]
        self.words = [content(normalise(p).split()) for p in phrases]
        self.encoder = encoder
        self.vectors = encoder.encode(phrases) if encoder is not None else None

    def lexical(self, words: list[str]) -> dict[str, float]:
        """Best typo-tolerant phrase overlap per kind."""
        out: dict[str, float] = {}
        for kind, phrase in zip(self.kinds, self.words, strict=True):
            score = phrase_score(words, phrase) if phrase else float(not words)
            out[kind] = max(out.get(kind, 0.0), score)
        return out

    def semantic(self, texts: list[str]) -> list[dict[str, float]]:
        """Best cosine to each kind's phrasings, rescaled so that 1.0 means 'clearly this'."""
        if self.encoder is None or self.vectors is None:
            return [{} for _ in texts]
        sims = self.encoder.encode(texts) @ self.vectors.T
        out = []
        for row in np.asarray(sims):
            best: dict[str, float] = {}
            for kind, sim in zip(self.kinds, row, strict=True):
                best[kind] = max(best.get(kind, -1.0), float(sim))
            out.append({k: float(np.clip((v - SEM_FLOOR) / (SEM_SURE - SEM_FLOOR), 0.0, 1.0)) for k, v in best.items()})
        return out


SEM_FLOOR, SEM_SURE = 0.55, 0.9  # cosine of the bundled model: unrelated phrasings stay below the floor
_models: dict[str, IntentModel] = {}
_lock = threading.Lock()


def model_for(encoder: Encoder | None) -> IntentModel:
    """The intent model for an encoder, built once per model (its example vectors are cached)."""
    key = encoder.model_id if encoder is not None else ""
    with _lock:
        if key not in _models:
            _models[key] = IntentModel(encoder)
        return _models[key]


def looks_like_question(text: str) -> bool:
    """A concept question: starts like one ('what is', 'how does', 'explain ...')."""
    return bool(_QUESTION_START.match(text))


def _without(words: list[str], *found: Found | None) -> list[str]:
    return [w for i, w in enumerate(words) if not any(f and f.covers(i) for f in found)]


def _unknown_topic(text: str) -> re.Match[str] | None:
    """'on X' at the end of 'quiz me on X', for when X is not a known topic."""
    return re.search(r"\b(?:on|about|in)\s+(.{2,60}?)\s*[?.!]*$", text.strip(), re.IGNORECASE)


def _scores(model: IntentModel, text: str, words: list[str], rest: list[str]) -> dict[str, float]:
    """Per kind, the better of phrase overlap and embedding similarity (skipped when a phrase matches exactly)."""
    full_lex, rest_lex = model.lexical(content(words)), model.lexical(content(rest))
    scores = {kind: (rest_lex if kind in SLOTTED else full_lex).get(kind, 0.0) for kind in EXEMPLARS}
    if max(scores.values()) >= 1.0:
        return scores
    full_sem, rest_sem = model.semantic([text, " ".join(rest) or text])
    for kind in EXEMPLARS:
        sem = rest_sem if kind in SLOTTED else full_sem
        scores[kind] = max(scores[kind], sem.get(kind, 0.0))
    return scores


def recognise(
    text: str, *, pending: bool, has_options: bool, vocab: Vocabulary, model: IntentModel
) -> Intent:
    """The intent of a message, given whether a quiz question is waiting for an answer."""
    words = normalise(text).split()
    letter = _LETTER.match(text)
    if pending and has_options and letter:
        return Intent(ANSWER, 1.0, choice=letter.group(1).upper())
    if not words:
        return Intent(HELP, 1.0)
    topic, demo = vocab.topic(words), vocab.demo(words)
    rest = _without(words, topic, demo)
    unknown = _unknown_topic(text) if topic is None else None
    if unknown:  # 'quiz me on french cooking': judge the command without the unknown subject
        rest = normalise(text.strip()[: unknown.start()]).split()
    scores = _scores(model, text, words, rest)
    kind = max(scores, key=lambda k: scores[k])
    # Long messages are answers or questions that happen to share words with a command.
    confident = scores[kind] >= ACCEPT and len(content(words)) <= 8
    if confident and not (pending and looks_like_question(text) and kind not in (EXPLAIN, HINT, PROGRESS, HELP)):
        return Intent(
            kind, scores[kind], topic=topic.key if topic else None, demo=demo.key if demo else None,
            unknown_topic=unknown.group(1) if unknown and kind == QUIZ else None,
        )
    if pending and not looks_like_question(text):
        return Intent(ANSWER, 1.0 - scores[kind])
    return Intent(ASK, 1.0 - scores[kind], topic=topic.key if topic else None)
