"""Text normalisation for grading: domain abbreviations, light stemming, typo-tolerant matching."""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections.abc import Callable, Collection, Iterable
from functools import lru_cache
from typing import Any, TypeVar

import cachetools

F = TypeVar("F", bound=Callable[..., Any])

# Grading asks for the same question, reference and idea texts on every answer, so their derived
# forms are remembered. Answers pass through the same functions, and answers come from anyone: a
# cache bounded by entries alone grew by about 545 MB with 16,384 distinct 2,000-character answers.
# Text caches are therefore bounded by the characters they hold, and word caches skip long "words".
TEXT_CACHE_CHARS = 500_000  # per function: about 1-3 MB of strings and their derived tuples (bench/soak.py)
MAX_CACHED_WORD = 40


def text_cache(max_chars: int = TEXT_CACHE_CHARS) -> Callable[[F], F]:
    """A thread-safe LRU cache of a function of texts, bounded by the characters of its arguments
    (counted twice: the key and a derived value of about the same size), not by entries."""

    def decorate(fn: F) -> F:
        cache: cachetools.LRUCache[tuple[Any, ...], tuple[int, Any]] = cachetools.LRUCache(
            maxsize=max_chars, getsizeof=lambda entry: entry[0]
        )
        lock = threading.Lock()

        @functools.wraps(fn)
        def call(*args: Any) -> Any:
            with lock:
                hit = cache.get(args)
            if hit is not None:
                return hit[1]
            value = fn(*args)
            weight = 2 * sum(len(a) for a in args if isinstance(a, str)) + 1
            if weight <= max_chars:
                with lock:
                    cache[args] = (weight, value)
            return value

        call.cache = cache  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return decorate


def word_cache(maxsize: int) -> Callable[[F], F]:
    """An LRU cache of a function of short words: arguments longer than MAX_CACHED_WORD are computed,
    not remembered."""

    def decorate(fn: F) -> F:
        cached = lru_cache(maxsize=maxsize)(fn)

        @functools.wraps(fn)
        def call(*args: str) -> Any:
            if any(len(a) > MAX_CACHED_WORD for a in args):
                return fn(*args)
            return cached(*args)

        call.cache_info = cached.cache_info  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return decorate

# Multi-word domain terms and spelling variants folded onto one token before splitting,
# so "tensor parallelism", "TP" and "tensor-parallel" all align with each other.
_PHRASES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(p), r) for p, r in [
        (r"fully[\s-]+sharded[\s-]+data[\s-]+par+[ae]l+[ae]l+\w*", " fsdp "),
        (r"distributed[\s-]*data[\s-]*par+[ae]l+[ae]l+\w*", " ddp "),
        (r"\bnn\.dataparallel\b", " dataparallel "),
        (r"\ball[\s_-]*reduc\w*", " allreduce "),
        (r"\ball[\s_-]*gather\w*", " allgather "),
        (r"\breduce[\s_-]*scatter\w*", " reducescatter "),
        (r"\ball[\s_-]*to[\s_-]*all\w*", " alltoall "),
        (r"\btensor[\s-]+par+[ae]l+[ae]l+\w*", " tp "),
        (r"\bdata[\s-]+par+[ae]l+[ae]l+\w*", " dp "),
        (r"\bpipeline[\s-]+par+[ae]l+[ae]l+\w*", " pp "),
        (r"\bexperts?[\s-]+par+[ae]l+[ae]l+\w*", " ep "),
        (r"\bmodel[\s-]+par+[ae]l+[ae]l+\w*", " mp "),
        (r"\bsequence[\s-]+par+[ae]l+[ae]l+\w*", " sp "),
        (r"\bmixture[\s-]+of[\s-]+experts?\b", " moe "),
        (r"\bzero[\s-]+redundancy[\s-]+optimi[sz]er\b", " zero "),
        (r"\b(gradient|activation)[\s-]+(checkpointing|recomputation|recompute)\b", " ckpt "),
        (r"\binfini[\s-]*band\b", " ib "),
        (r"\bpeer[\s-]+to[\s-]+peer\b", " p2p "),
        (r"\bb(?:rain)?[\s-]*float[\s-]*16\b|\bbf[\s-]?16\b", " bf16 "),
        (r"\bfloat[\s-]*16\b|\bfp[\s-]?16\b|\bhalf[\s-]+precision\b", " fp16 "),
        (r"\bfloat[\s-]*32\b|\bfp[\s-]?32\b|\bsingle[\s-]+precision\b", " fp32 "),
        (r"\bfloat[\s-]*8\b|\bfp[\s-]?8\b", " fp8 "),
        (r"\blearning[\s-]+rates?\b", " lr "),
        (r"\bmicro[\s-]*batch\w*", " microbatch "),
        (r"\bmini[\s-]*batch\w*", " minibatch "),
        (r"\bone[\s-]+forward[\s-]+one[\s-]+backward\b", " 1f1b "),
        (r"\bmodel[\s-]+flops?[\s-]+utili[sz]ation\b", " mfu "),
        (r"\bglobal[\s-]+interpreter[\s-]+lock\b", " gil "),
        (r"\bkey[\s-]+value[\s-]+store\b", " kvstore "),
        (r"\bstale[\s-]+synchronous[\s-]+parallel\b", " ssp "),
        (r"\bbus[\s-]+bandwidth\b", " busbw "),
        (r"\bgpu[\s-]*direct\b", " gpudirect "),
        (r"\bnv[\s-]*link\b", " nvlink "),
        (r"\bback[\s-]*prop\w*|\bbackward[\s-]+pass\w*", " backward "),
        (r"\bforward[\s-]+pass\w*", " forward "),
        (r"\bdoesn'?t\b|\bdon'?t\b|\bisn'?t\b|\baren'?t\b|\bcan'?t\b|\bcannot\b|\bwon'?t\b", " not "),
        (r"\bdidn'?t\b|\bwasn'?t\b|\bweren'?t\b|\bshouldn'?t\b|\bwouldn'?t\b|\bhasn'?t\b", " not "),
    ]
]

# Whole-token synonyms, applied to the raw token and again to its stem.
_SYNONYMS: dict[str, str] = {
    "gpus": "gpu", "devic": "gpu", "device": "gpu", "devices": "gpu", "accelerator": "gpu",
    "weight": "param", "weights": "param", "parameter": "param", "parameters": "param",
    "params": "param", "paramet": "param",
    "shard": "split", "partition": "split", "divid": "split", "divide": "split", "slice": "split",
    "chunk": "split", "piec": "split", "fragment": "split", "splitt": "split", "sharded": "split",
    "replic": "replicat", "copi": "replicat", "copy": "replicat", "duplicat": "replicat",
    "clon": "replicat", "mirror": "replicat",
    "lower": "reduc", "decreas": "reduc", "cut": "reduc", "shrink": "reduc", "minimi": "reduc",
    "fewer": "reduc", "less": "reduc", "smaller": "reduc",
    "vram": "memori", "hbm": "memori", "memory": "memori",
    "idl": "idle", "stall": "idle", "wait": "idle",
    "synchronous": "sync", "synchron": "sync", "asynchronous": "async", "asynchron": "async",
    "infiniband": "ib", "microbatches": "microbatch", "comm": "commun",
    "grow": "increas", "larger": "increas", "bigger": "increas", "rais": "increas",
    "data-parallel": "dp", "nic": "adapter", "hca": "adapter", "fast": "speed", "quick": "speed",
    "faster": "speed", "throughput": "speed", "proces": "process",
    "rank": "gpu", "worker": "gpu", "grad": "gradient", "gradi": "gradient", "grads": "gradient",
    "batch": "data", "input": "data", "sampl": "data", "dataset": "data", "network": "model",
    "replica": "replicat", "everi": "each", "every": "each", "whol": "full", "entir": "full",
    "complet": "full", "swap": "exchang", "shuffl": "exchang",
    "optimis": "optimiz", "optimizer": "optimiz", "optimiser": "optimiz",
    "recomput": "recomput", "recalculat": "recomput", "regenerat": "recomput",
}


def _by_first_letter(synonyms: dict[str, str]) -> dict[str, list[tuple[str, str]]]:
    """The keys a misspelt word may be taken for, by first letter, in order: keys of six letters
    or more (a typo is never looked for in the first letter)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for key, value in synonyms.items():
        if len(key) >= 6:
            out.setdefault(key[0], []).append((key, value))
    return out


_FUZZY_KEYS = _by_first_letter(_SYNONYMS)

STOPWORDS = frozenset(
    {
        "a", "an", "the", "and", "or", "but", "if", "then", "else", "of", "to", "in", "on", "at",
        "by", "for", "with", "from", "into", "onto", "over", "under", "as", "is", "are", "was",
        "were", "be", "been", "being", "am", "do", "does", "did", "doing", "done", "has", "have",
        "had", "having", "it", "its", "it's", "this", "that", "these", "those", "there", "here",
        "which", "who", "whom", "whose", "what", "when", "where", "why", "how", "than", "so",
        "such", "can", "could", "should", "would", "may", "might", "must", "will", "shall", "i",
        "you", "he", "she", "we", "they", "me", "him", "her", "us", "them", "my", "your", "our",
        "their", "his", "also", "just", "only", "very", "more", "most", "much", "many", "some",
        "any", "each", "every", "all", "both", "either", "neither", "other", "another", "same",
        "own", "about", "above", "below", "up", "down", "out", "off", "again", "further", "once",
        "while", "during", "before", "after", "between", "through", "via", "per", "across",
        "within", "without", "not", "no", "nor", "never", "too", "one", "two", "three",
        "way", "ways", "thing", "things", "get", "gets", "got", "make", "makes", "made", "use",
        "uses", "used", "using", "basically", "essentially", "actually", "really", "like", "e.g",
        "i.e", "etc", "because", "since", "whereas", "instead", "rather", "cause", "causes",
    }
)

NEGATIONS = frozenset({"not", "no", "never", "without", "nor", "neither", "none", "nothing"})
NEGATION_STEMS = ("bypass", "avoid", "eliminat", "remov", "skip", "lack", "prevent", "free")

_TOKEN = re.compile(r"[a-z0-9_]+(?:\.[a-z0-9_]+)*")
_SUFFIXES = (
    "izations", "isations", "ization", "isation", "ational", "ations", "ation", "ments", "ment",
    "ings", "ing", "ness", "ities", "ity", "ies", "ied", "ed", "es", "ers", "er", "ly", "ism",
    "s", "e",
)


# Kinds of parallelism named together before one "parallelism" ("data, tensor and pipeline parallelism"):
# each is given its own, so that the phrase folding above takes every one of them. A kind after "the", "a"
# or "of" is a noun, not a kind ("splits the data, model parallelism splits the model"), and so is a plural
# ("a bunch of experts, and expert parallelism spreads them").
_KIND = r"(?:data|tensor|pipeline|model|expert|sequence)"
_JOIN = r"\s*(?:,|/|&|\band\b|\bor\b)\s*(?:and\s+|or\s+)?"  # ", ", " and ", ", and ", "/", " or "
_NOT_A_NOUN = r"(?<!\bthe )(?<!\ban )(?<!\ba )(?<!\bof )"
_COORDINATED = re.compile(rf"{_NOT_A_NOUN}\b({_KIND}(?:{_JOIN}{_KIND})+)\s+(par+[ae]l+[ae]l+\w*)")
_KIND_SEPARATOR = re.compile(f"({_JOIN})")


def _distribute(match: re.Match[str]) -> str:
    """"data, tensor and pipeline parallelism" -> "data parallelism, tensor parallelism and pipeline parallelism"."""
    parts = _KIND_SEPARATOR.split(match.group(1))  # kind, separator, kind, ...
    return "".join(p if i % 2 else f"{p} {match.group(2)}" for i, p in enumerate(parts))


@text_cache()
def fold(text: str) -> str:
    """Lowercase, strip accents and apply the domain phrase folding."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = " " + text.lower().replace("’", "'") + " "
    text = _COORDINATED.sub(_distribute, text)
    for pattern, repl in _PHRASES:
        text = pattern.sub(repl, text)
    return text


def raw_tokens(text: str) -> list[str]:
    """Folded tokens in order, stopwords included (dotted names split into parts)."""
    return list(_tokens(text))


@text_cache()
def _tokens(text: str) -> tuple[str, ...]:
    out: list[str] = []
    for tok in _TOKEN.findall(fold(text)):
        out.extend(part for part in tok.split(".") if part)
    return tuple(out)


@word_cache(maxsize=16384)
def stem(word: str) -> str:
    """A light suffix-stripping stemmer followed by the domain synonym map."""
    word = _SYNONYMS.get(word) or _fuzzy_synonym(word) or word
    if len(word) > 3 and not word[-1].isdigit() and not word.endswith("ss"):
        for suffix in _SUFFIXES:
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
    return _SYNONYMS.get(word, word)


def _fuzzy_synonym(word: str) -> str | None:
    """A synonym key one typo away ('wieghts' -> 'weights'), for words long enough to be safe."""
    if len(word) < 6:
        return None
    for key, value in _FUZZY_KEYS.get(word[0], ()):
        if _edit_distance_at_most(word, key, 1):
            return value
    return None


def content_stems(text: str) -> list[str]:
    """Stems of the content words of a text, in order."""
    return list(_content_stems(text))


@text_cache()
def _content_stems(text: str) -> tuple[str, ...]:
    return tuple(stem(t) for t in _tokens(text) if t not in STOPWORDS)


def _edit_distance_at_most(a: str, b: str, limit: int) -> bool:
    """Damerau-Levenshtein (optimal string alignment) distance <= limit."""
    if abs(len(a) - len(b)) > limit:
        return False
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        if min(cur) > limit:
            return False
        prev2, prev = prev, cur
    return prev[-1] <= limit


@word_cache(maxsize=65536)
def stems_match(a: str, b: str) -> bool:
    """Whether two stems denote the same word: equal, a long shared prefix, or a small typo."""
    if a == b:
        return True
    short, long_ = sorted((a, b), key=len)
    if len(short) >= 5 and long_.startswith(short):
        return True
    if a.isdigit() or b.isdigit() or len(short) < 6:
        return False
    return _edit_distance_at_most(a, b, 2 if len(short) >= 9 else 1)


class StemSet(frozenset[str]):
    """Stems with what `has_match` needs computed once: those of 5+ letters (only they can match a
    stem other than themselves) and, with `remember`, the answer for each word already asked.

    An answer's stems remember: grading asks about the same rubric words several times for one
    answer (each reference's recall twice, its ideas, the wrong options' own words), and the set
    is used by one thread, then dropped. A rubric's vocabulary does not: it lives as long as the
    rubric, and would otherwise keep every word of every answer graded against it.
    """

    __slots__ = ("_long", "_seen")
    _long: tuple[str, ...]
    _seen: dict[str, bool] | None

    def __new__(cls, stems: Iterable[str] = (), *, remember: bool = True) -> StemSet:
        self = super().__new__(cls, stems)
        self._long = tuple(s for s in self if len(s) >= 5)
        self._seen = {} if remember else None
        return self

    def matches(self, word: str) -> bool:
        """`has_match(word, self)`, for a word of 5+ letters that is not in the set."""
        found = self._seen.get(word) if self._seen is not None else None
        if found is None:
            found = any(stems_match(word, o) for o in self._long)
            if self._seen is not None:
                self._seen[word] = found
        return found


def has_match(word: str, others: Collection[str]) -> bool:
    """Whether a stem matches any stem in a collection."""
    if word in others:
        return True
    if len(word) < 5:  # beyond equality, stems_match needs both stems 5+ letters long
        return False
    if isinstance(others, StemSet):
        return others.matches(word)
    return any(stems_match(word, o) for o in others)


def unstopped(answer: str) -> str:
    """The answer without its final full stops (empty when nothing else is there)."""
    return answer.rstrip().rstrip(".").rstrip()


def without_final_stops(answer: str) -> str:
    """The answer without its final full stops, or as it is when it is nothing else ("...")."""
    return unstopped(answer) or answer


@text_cache()  # options and references are normalised again for every answer
def normalise_option(text: str) -> str:
    """Case- and punctuation-insensitive form used for exact option matching."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    return " ".join(re.findall(r"[a-z0-9]+", text))
