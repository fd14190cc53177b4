"""Text normalisation and typo-tolerant phrase matching for chat messages."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

# Chat shorthand and common slips, mapped before matching.
_SHORTHAND = {
    "pls": "please", "plz": "please", "pleas": "please", "u": "you", "r": "are", "im": "i am",
    "gimme": "give me", "lemme": "let me", "wanna": "want to", "whats": "what is", "hows": "how is",
    "dont": "do not", "don't": "do not", "i'm": "i am", "idk": "i do not know", "dunno": "do not know", "thx": "thanks",
    "y": "why", "wat": "what", "wut": "what", "nxt": "next", "q": "question", "qs": "questions",
}
# Words that carry no intent: ignored on both sides when phrases are compared.
FILLER_WORDS = (
    "a an the please can could would you me i to some just now ok okay hey so well um uh then this that "
    "one it for us lets on about in of with my get id like want need really training topic"
)
FILLER = frozenset(FILLER_WORDS.split())


def normalise(text: str) -> str:
    """Lower-case, NFKC, shorthand expanded, punctuation dropped (except inside tokens like all-reduce)."""
    text = unicodedata.normalize("NFKC", text).casefold().replace("’", "'")
    text = re.sub(r"(?<=\w)-(?=\w)", "", text)  # all-reduce -> allreduce, so spellings agree
    words = [_SHORTHAND.get(w, w) for w in re.findall(r"[a-z0-9']+", text)]
    return " ".join(w.replace("'", "") for w in words)


def tokens(text: str) -> list[str]:
    """The normalised tokens of a text."""
    return normalise(text).split()


def content(words: Sequence[str]) -> list[str]:
    """The tokens that are not filler."""
    return [w for w in words if w not in FILLER]


def edit_distance(a: str, b: str, limit: int = 3) -> int:
    """Optimal string alignment distance (a transposition counts as one edit), capped at limit."""
    if abs(len(a) - len(b)) > limit:
        return limit
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return min(prev[-1], limit)


def same_word(a: str, b: str, typo_from: int = 3) -> bool:
    """Equal, a likely typo (one edit up to 6 letters, two above), or a '*' stem's word ('parallel*')."""
    if a.endswith("*"):
        return b.startswith(a[:-1]) or (len(b) >= len(a) - 1 and same_word(a[:-1], b[: len(a) - 1], typo_from))
    if a == b:
        return True
    shortest = min(len(a), len(b))
    if shortest < typo_from or a.isdigit() or b.isdigit():
        return False
    allowed = 1 if shortest <= 6 else 2
    return edit_distance(a, b, allowed + 1) <= allowed


def phrase_score(message: Sequence[str], phrase: Sequence[str]) -> float:
    """F1 of typo-tolerant word overlap between two content-word lists (1.0: the same phrase)."""
    if not message or not phrase:
        return 0.0
    used: set[int] = set()
    hits = 0
    for word in phrase:
        for i, candidate in enumerate(message):
            if i not in used and same_word(word, candidate):
                used.add(i)
                hits += 1
                break
    if not hits:
        return 0.0
    precision, recall = hits / len(message), hits / len(phrase)
    return 2 * precision * recall / (precision + recall)


def find_phrase(words: Sequence[str], phrase: Sequence[str], typo_from: int = 5) -> tuple[int, int] | None:
    """Where a phrase occurs in the words, typos allowed (also glued: 'all reduce' ~ 'allreduce')."""
    n = len(phrase)
    glued = "".join(phrase)
    for start in range(len(words)):
        window = words[start : start + n]
        if len(window) == n and all(same_word(p, w, typo_from) for p, w in zip(phrase, window, strict=True)):
            return start, start + n
        if n > 1 and same_word(glued, words[start], typo_from):
            return start, start + 1
        for k in (2, 3):  # 'all reduce' written apart ~ 'allreduce'
            if start + k <= len(words) and same_word(glued, "".join(words[start : start + k]), typo_from):
                return start, start + k
    return None
