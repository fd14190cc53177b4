"""Surface checks that sentence vectors miss: evasion, injection, keyword lists, negation, roles."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from itertools import pairwise

from app.grading.text import (
    NEGATION_STEMS,
    NEGATIONS,
    STOPWORDS,
    content_stems,
    has_match,
    raw_tokens,
    stem,
    text_cache,
)

# An answer that is nothing but a non-answer ("the right one", "pass", "it depends", "?"). Saying one does
# not know ("idk", "not sure", "I forgot") is `_HEDGE_OPENER`'s, with whatever little follows it.
_EVASIVE = re.compile(
    r"^(?:unsure|pass|skip|\?+|n/?a|none|nothing|whatever|"
    r"(?:it'?s\s+|it\s+is\s+)?(?:the\s+)?(?:right|correct|best|obvious|usual|first|last)\s+"
    r"(?:one|answer|option|choice)|(?:see|same\s+as)\s+(?:above|before)|"
    r"(?:all|none)\s+of\s+(?:the\s+)?above|something|stuff|it\s+depends|depends|"
    r"i\s+guess|guess|you\s+tell\s+me|good\s+question|yes|no|maybe|ok(?:ay)?|test|asdf\w*)"
    r"(?:[\s,.!?]+(?:sorry|lol|honestly|tbh|really|i\s+guess|maybe|though))*[\s.!?]*$",
    re.IGNORECASE,
)

_INJECTION = re.compile(
    r"(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+|the\s+|your\s+|previous\s+|"
    r"prior\s+|above\s+|these\s+)*(?:instructions?|rubric|rules?|prompt|grading|criteria|"
    r"reference|answer\s+key)"
    r"|(?:mark|grade|score|count|rate|treat|accept|consider)\s+(?:this|it|me|my\s+answer|the\s+answer"
    r"|this\s+answer)\s+(?:as\s+)?(?:correct|right|true|full|100|perfect|valid)"
    r"|(?:give|award)\s+(?:me\s+|this\s+)?(?:full|maximum|max|100%?|all\s+the)\s*(?:marks?|points?|"
    r"credit|score)"
    r"|system\s+prompt|you\s+are\s+now\s+|as\s+the\s+grader|dear\s+grader|note\s+to\s+(?:the\s+)?grader"
    r"|(?:this|the)\s+answer\s+(?:is|must\s+be|should\s+be)\s+(?:marked\s+|graded\s+)?(?:correct|right)"
    r"|verdict\s*[:=]\s*correct|(?:output|return|respond\s+with)\s+[\"']?correct",
    re.IGNORECASE,
)
# The same pattern without IGNORECASE, for ASCII text lowercased first: about four times faster
# (IGNORECASE tries every case at every position). Other text keeps the original pattern,
# since IGNORECASE also folds a few non-ASCII letters onto ASCII ones (the long s onto "s").
_INJECTION_LOWER = re.compile(_INJECTION.pattern)
_TERM = re.compile(r"\b(?:[A-Z][A-Za-z0-9]*[A-Z0-9][A-Za-z0-9]*|[a-z]+[A-Z][A-Za-z]*|\w*\d\w*)\b")
_CLAUSE = re.compile(r"[^.;!?\n]+[.;!?\n]*")
_SPLIT_CLAUSES = re.compile(r"[;.!?\n]+|,\s*(?:while|whereas|but)\s+|\s+(?:while|whereas)\s+")


# "I am not sure, something about GPUs": a hedge that opens the answer, and next to nothing after it.
_HEDGE_OPENER = re.compile(
    r"^\s*(?:(?:i\s*(?:am|'m)\s+)?not\s+(?:really\s+|quite\s+|totally\s+|entirely\s+|100\s*%\s+)?sure|"
    r"(?:i\s+(?:have|got)\s+)?(?:no|not\s+a)\s+(?:real\s+)?(?:idea|clue)|idk|dunno|beats\s+me|"
    r"i\s*(?:do\s*n[o']?t|dont)\s+(?:really\s+)?know|i\s+forg[eo]t|"
    r"i\s*(?:can'?t|cannot|do\s*n[o']?t|dont)\s+(?:really\s+)?(?:remember|recall)|"
    r"i(?:\s*am|'m)\s+(?:blanking|drawing\s+a\s+blank))\b[\s,.;:!-]*(?P<rest>.*)$",
    re.IGNORECASE,
)
HEDGE_CONTENT = 3  # at most this many content words after a hedge, and the answer says nothing
# What follows a hedge and only points at a subject: "something about GPUs", "it has to do with rings", "the
# ring thing", "some kind of parallelism".
_POINTS_VAGUELY = re.compile(r"\b(?:something|stuff|things?|some\s+kind|sort\s+of|kind\s+of|to\s+do\s+with)\b",
                             re.IGNORECASE)


def _short_rest(text: str) -> str | None:
    """What follows a hedge that opens the answer, when it is at most HEDGE_CONTENT content words."""
    hedged = _HEDGE_OPENER.match(text)
    if hedged is not None and len([t for t in raw_tokens(hedged["rest"]) if t not in STOPWORDS]) <= HEDGE_CONTENT:
        return str(hedged["rest"])
    return None


def _says_beyond(rest: str, beyond: Callable[[str], bool]) -> bool:
    """Whether a hedge's short rest says something: a word beyond the question, and more than a pointer."""
    return _POINTS_VAGUELY.search(rest) is None and any(beyond(s) for s in content_stems(rest))


def is_evasive(answer: str, beyond: Callable[[str], bool] | None = None) -> bool:
    """An answer that says nothing: 'idk', 'the right one', 'not sure', 'not sure, something about GPUs'.
    `beyond`, where given, tells whether a stem goes beyond the question's own words towards its accepted
    answers (Rubric.goes_beyond): a hedge followed by such a word says something and is graded on it ("not
    sure, maybe they are sharded across the GPUs")."""
    text = answer.strip()
    if not text:
        return False
    if _EVASIVE.match(text):
        return True
    rest = _short_rest(text)
    if rest is not None:
        return beyond is None or not _says_beyond(rest, beyond)
    tokens = raw_tokens(text)
    return bool(tokens) and all(t in STOPWORDS for t in tokens) and len(tokens) <= 6


# A guess word before a short claim ("maybe DDP", "probably the sharded one", "I think it's UCX").
_GUESS = re.compile(r"^(?:(?:maybe|probably|perhaps|possibly|i\s+(?:think|guess|believe)|it'?s|it\s+is)\b[\s,]*)+",
                    re.IGNORECASE)


_GUESS_AFTER = re.compile(r"(?:[\s,]+(?:maybe|probably|perhaps|possibly|i\s+(?:think|guess|believe)))+[\s?.!]*$",
                          re.IGNORECASE)


def without_guess(answer: str) -> str:
    """The answer without guess words before or after it ("DDP i think", "probably UCX", "I think it's DDP"):
    what the exact-option check reads, so that a guessed option is that option. An answer of guess words
    alone is kept."""
    return _GUESS_AFTER.sub("", _GUESS.sub("", answer.strip())).strip() or answer.strip()


def hedged_claim(answer: str, beyond: Callable[[str], bool]) -> str | None:
    """The claim of a hedge followed by a short answer that says something ("not sure, maybe DDP?": "DDP?";
    "no idea, probably sharded across the GPUs"), without the hedge and the guess words before it, so that
    it is graded as the claim alone; None for any other answer."""
    rest = _short_rest(answer.strip())
    if rest is None or not _says_beyond(rest, beyond):
        return None
    claim = _GUESS.sub("", rest.strip()).strip()
    return claim or None


# The writer says, anywhere in the answer, that they do not know or cannot tell the terms apart, or sends
# the reader elsewhere for the answer: "the pytorch one, i forget the exact class name", "some kind of
# parallelism, i mix them up", "you just call the fsdp save api, check the tutorial". A mild hedge ("I
# think", "probably", "maybe") is how many right answers are written and is not one of these.
_ADMITS_NOT_KNOWING = re.compile(
    r"\b(?:not\s+(?:really\s+|quite\s+|totally\s+|entirely\s+|100\s*%\s+)?sure|"
    r"(?:no|not\s+a)\s+(?:real\s+)?(?:idea|clue)|idk|dunno|beats\s+me|"
    r"i\s*(?:do\s*n[o']?t|dont)\s+(?:really\s+)?know|i\s+(?:forg[eo]t|(?:have|'ve)\s+forgotten)|"
    r"(?:can'?t|cannot|do\s*n[o']?t|dont)\s+(?:really\s+)?(?:remember|recall)|"
    r"(?:mix(?:ed)?|get|got)\s+(?:them|these|those|the\w*)\s+(?:mixed\s+)?up|mix(?:ed)?\s+up|"
    r"i(?:\s*am|'m)\s+(?:blanking|drawing\s+a\s+blank)|"
    r"(?:check|see|look\s+at|read)\s+the\s+(?:docs?|documentation|tutorial|notes|slides|manual)|"
    r"look\s+it\s+up)\b",
    re.IGNORECASE,
)


def admits_not_knowing(answer: str) -> bool:
    """Whether the writer says somewhere in the answer that they do not know ("I forget which one", "not sure
    where they go", "I mix them up", "check the docs"). It settles nothing alone: a hedged answer that goes on
    to say something is graded on what it says (grader._admits_not_knowing)."""
    return _ADMITS_NOT_KNOWING.search(answer) is not None


# A lead-in that says nothing of the answer ("In short:", "Basically,", "So,"). The grader read such an
# opening as a sign of a right answer: prefixed to the dev set's and the written files' wrong answers,
# "In short: " had the grader call 83 of 463 correct (docs/GRADING.md, "Lead-ins"). It is cut before
# anything reads the answer, up to three in a row ("So, basically: ...").
_LEAD_IN = re.compile(
    r"^\s*(?:(?:in\s+short|in\s+a\s+nutshell|in\s+summary|to\s+sum(?:marize|marise)?\s+up|to\s+summari[sz]e|"
    r"long\s+story\s+short|simply\s+put|put\s+simply|tl;?\s*dr)\b[\s,:;.!-]*|"
    r"(?:so|well|basically|essentially|ok|okay|right|yes|yeah|sure|um+|uh+|hmm+|answer|my\s+answer)\s*[,:;!]+\s*)",
    re.IGNORECASE,
)


def strip_lead_in(answer: str) -> str:
    """The answer without the lead-ins it opens with (at most three); the answer itself when nothing
    follows them."""
    text = answer
    for _ in range(3):
        cut = _LEAD_IN.match(text)
        if cut is None or not text[cut.end():].strip():
            break
        text = text[cut.end():]
    return text


# An opening or a closing that says nothing of this question ("Honestly, ...", "My take: ...", "...
# I'm fairly confident."): the judges read such words as a sign of a right answer, whatever the words
# (docs/GRADING.md, "Lead-ins"). No list of phrases can hold them all, so an edge is judged by its
# form and by what it shares with the question's material. A leading clause (up to a comma, a colon, a
# dash, an ellipsis or a full stop) or a closing sentence is cut when it speaks of the writer (a
# first-person word and at most two other words: "As I understand it", "My take") or is made of
# interjections or one sentence adverb ("Hm okay", "Honestly"), and it holds none of the words of the
# question's material (its question, accepted and wrong answers, explanation and examples), no
# negation, no number and no technical term. The answer left must still say something.
EDGE_WORDS = 6
EDGE_OTHER_WORDS = 2  # besides first-person and function words, in an edge that speaks of the writer
_LEAD_EDGE = re.compile(r"^\s*(?P<edge>[^,:;.!?\u2026\u2014\u2013\n()]+?)\s*"
                        r"(?:\.{2,}|\u2026|[,:;!\u2014\u2013]|\.(?=\s)|\s-(?=\s))\s*")
_TAIL_EDGE = re.compile(r"(?<![.\s][a-z]\.)(?<=[.!?])\s+(?P<edge>[A-Z][^.!?\n()]*[.!?]*)\s*$")
_EDGE_DENIALS = NEGATIONS | {"t", "cannot", "nobody", "nowhere", "only", "except", "unless", "opposite", "wrong",
                             "false"}
_QUANTITIES = frozenset({"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "both", "all",
                         "every", "each", "half", "twice", "none", "many", "few"})
_FIRST_PERSON = frozenset({"i", "m", "me", "my", "mine", "myself", "ve", "d", "ll"})  # "I'm" is i + m
_INTERJECTIONS = frozenset({"oh", "ah", "aha", "hm", "hmm", "um", "umm", "uh", "er", "erm", "well", "ok", "okay",
                            "yeah", "yep", "yes", "sure", "right", "alright", "anyway", "anyways", "so", "now"})


def _says_nothing(edge: str, known: Callable[[str], bool]) -> bool:
    tokens = raw_tokens(edge)
    if not tokens or len(tokens) > EDGE_WORDS or _TERM.search(edge):
        return False
    if any(t in _EDGE_DENIALS or t in _QUANTITIES or any(c.isdigit() for c in t) for t in tokens):
        return False
    words = [t for t in tokens if t not in STOPWORDS and t not in _FIRST_PERSON and t not in _INTERJECTIONS]
    if any(known(stem(t)) for t in words):
        return False
    if all(t in _INTERJECTIONS for t in tokens) or (len(tokens) == 1 and tokens[0].endswith("ly")):
        return True
    return not _FIRST_PERSON.isdisjoint(tokens) and len(words) <= EDGE_OTHER_WORDS


def _says_something(text: str) -> bool:
    return len(content_stems(text)) >= 2


def strip_empty_edges(answer: str, known: Callable[[str], bool]) -> str:
    """The answer without openings and closings that say nothing of the question (`known`: whether a
    stem is in the question's material); up to three openings and one closing, and never the whole
    answer or all its content."""
    text = answer.strip()
    for _ in range(3):
        cut = _LEAD_EDGE.match(text)
        if cut is None or not _says_nothing(cut["edge"], known) or not _says_something(text[cut.end():]):
            break
        text = text[cut.end():]
    tail = _TAIL_EDGE.search(text)
    if tail is not None and _says_nothing(tail["edge"], known) and _says_something(text[: tail.start()]):
        text = text[: tail.start()]
    return text


def has_injection(text: str) -> bool:
    """Whether the text has a sentence that instructs the grader."""
    if text.isascii():
        return _INJECTION_LOWER.search(text.lower()) is not None
    return _INJECTION.search(text) is not None


def strip_injection(answer: str) -> tuple[str, bool]:
    """Remove sentences that instruct the grader; returns (remaining text, whether any were found)."""
    if not has_injection(answer):
        return answer, False
    kept: list[str] = []
    for clause in _CLAUSE.findall(answer):
        if not has_injection(clause):
            kept.append(clause)
            continue
        # Keep any real content before the instruction inside the same sentence.
        head = _INJECTION.split(clause)[0]
        head = re.split(r"\b(?:so|and|please|also|pls)\s*$", head.strip(" ,-:"), flags=re.I)[0]
        if len(content_stems(head)) >= 2:
            kept.append(head.strip(" ,-:") + ". ")
    return " ".join(k.strip() for k in kept if k.strip()), True


# Words that set one term against another and so make a terse answer a claim ("lockstep all-reduce vs
# independent stale updates", "... by marking unused params ready").
_RELATING_WORDS = frozenset({"by", "across", "against", "into", "onto", "via", "through", "between", "vs", "versus"})


def relates_terms(answer: str) -> bool:
    """Whether a terse answer relates its terms: two parts of two words or more joined by ";" or ":"
    ("DP: model copied, data split; MP: model split"), or a relating word between two of its words."""
    clauses = [part for part in re.split(r"[;:]", answer) if len(raw_tokens(part)) >= 2]
    return len(clauses) >= 2 or any(t in _RELATING_WORDS for t in raw_tokens(answer)[1:-1])


def is_keyword_list(answer: str, reference: str) -> bool:
    """A bare list of terms ('NCCL NVLink RDMA all-reduce') where the reference is a sentence."""
    if relates_terms(answer):
        return False  # a terse claim ("DP copies model, splits data; MP splits model"), not a list
    items = [i for i in re.split(r"[,;/]", answer) if i.strip()]
    if len(items) >= 2 and sum(len(raw_tokens(i)) > 3 for i in items) > len(items) // 4:
        return False  # comma-separated clauses ("src rank's tensor copied to everyone, e.g. weights"), not terms
    tokens = raw_tokens(answer)
    content = [t for t in tokens if t not in STOPWORDS]
    if len(content) < 4 or len(tokens) > 14:
        return False
    ref_function = [t for t in raw_tokens(reference) if t in STOPWORDS]
    if len(ref_function) < 2:
        return False  # the reference is itself a list ("data + tensor + pipeline parallelism")
    if len(items) >= 4 and all(len(raw_tokens(i)) <= 3 for i in items):
        return True  # four or more short comma-separated terms
    if (len(tokens) - len(content)) / len(tokens) > 0.1:
        return False
    # A noun phrase ("8-bit floating point format") is not a list; many named terms are.
    termlike = len(_TERM.findall(answer))
    return len(content) >= 6 or termlike >= 2


def own_terms(answer: str, asked: Collection[str]) -> list[str]:
    """The technical terms of the answer (an acronym, a CamelCase or dotted-case name, a word with a digit:
    "TCP", "INT8", "GradScaler") that the question does not hold: what an answer names of its own, right
    or wrong, however little of the accepted answer's wording it uses."""
    return [term for term in _TERM.findall(answer)
            if not all(has_match(s, asked) for s in content_stems(term))]


def restates_question(answer: str, question: str, coverage: float) -> bool:
    """An answer made only of the question's own words ('the efficiency metric'): it adds nothing."""
    stems = [s for s in content_stems(answer) if len(s) > 1]
    if not stems or coverage >= 0.2:
        return False
    asked = set(content_stems(question))
    return all(has_match(s, asked) for s in stems)


HARD_NEGATIONS = NEGATIONS - {"without"}
# After a cue, a word that turns the negation into an assertion: "don't forget set_epoch", "not only X",
# "don't just make the model huge".
_AFFIRMING = frozenset({"forget", "neglect", "omit", "only", "just", "merely"})
DENIALS = HARD_NEGATIONS | {"nobody", "noone"}  # what the feedback reads as denying a claim
# Words that end a negation's scope: a new clause or a condition ("no rank continues until ...").
_SCOPE_END = frozenset({"but", "so", "because", "it", "its", "they", "which", "until", "unless",
                        "except", "when", "where", "while"})
# "not every stage", "don't keep all": denying a universal is not denying the claim.
_UNIVERSAL = frozenset({"all", "every", "each", "always", "entirely", "completely", "fully"})
# In a reference, "reduces idle time" says idle time is unwanted: answers may deny it.
_REF_CUES = frozenset({"reduc", "limit"})  # stems: lower, decrease, minimise ... fold onto "reduc"
_HYPOTHETICAL = frozenset({"if", "unless", "whenever"})  # "if some ranks never reach it" asserts nothing
_SCOPE_SPLIT = re.compile(r"[;.!?\n()\[\]]+|\s-+\s|,\s*(?:while|whereas|but|and)\s+|\s+(?:while|whereas)\s+")


def _denies_universal(toks: list[str], i: int) -> bool:
    """A universal among the two words after the cue at i: "not every stage", but not "never ... each other"."""
    return any(tok in _UNIVERSAL and not (tok == "each" and toks[j + 1 : j + 2] == ["other"])
               for j, tok in enumerate(toks[i + 1 : i + 3], start=i + 1))


def _is_cue(toks: list[str], i: int, soft: bool, hard: frozenset[str], affirming: frozenset[str]) -> bool:
    tok = toks[i]
    if tok in hard:
        return not _denies_universal(toks, i) and not affirming.intersection(toks[i + 1 : i + 2])
    if not soft:
        return False
    if tok == "without" or any(tok.startswith(s) for s in NEGATION_STEMS):
        return True
    return tok in {"instead", "rather"} and i + 1 < len(toks) and toks[i + 1] in {"of", "than"}


def negated_spans(text: str, soft: bool = True, width: int = 3, hard: frozenset[str] = HARD_NEGATIONS,
                  affirming: frozenset[str] = frozenset()) -> tuple[set[str], list[str]]:
    """Stems in the scope (width content words) of a negation cue, and the stems outside any. A hard cue
    right before a word of `affirming` is no cue. A scope ends at a clause break (`_SCOPE_SPLIT`), a comma, a
    word of `_SCOPE_END` or a word of `hard` ("no overlap, call set_epoch" denies only the overlap)."""
    negated: set[str] = set()
    outside: list[str] = []
    for clause in _SCOPE_SPLIT.split(text):
        toks: list[str] = []
        commas: set[int] = set()  # where a comma ends the part before it
        for part in clause.split(","):
            commas.add(len(toks))
            toks += raw_tokens(part)
        scope = 0
        hypothetical = False
        for i, tok in enumerate(toks):
            hypothetical = hypothetical or tok in _HYPOTHETICAL
            if i in commas:
                scope = 0
            if _is_cue(toks, i, soft, hard, affirming) and not hypothetical:
                scope = width
                continue
            if tok in _SCOPE_END or tok in hard:  # a cue that is none ("don't forget") still starts a new phrase
                scope = 0
            if tok in STOPWORDS:
                continue
            if scope > 0:
                negated.add(stem(tok))
                scope -= 1
            else:
                outside.append(stem(tok))
    return negated, outside


@text_cache()  # asked of the same references for every answer that negates something
def negated_stems(text: str) -> frozenset[str]:
    """Content stems that fall within the scope of a negation cue (soft cues included)."""
    return frozenset(negated_spans(text)[0])


def _prefix_denied(toks: list[str]) -> set[str]:
    """Stems that a "non-" prefix denies among a text's tokens ("non-overlapping": `overlapp`)."""
    return {stem(nxt) for tok, nxt in pairwise(toks) if tok == "non" and nxt not in STOPWORDS}


@text_cache()
def reference_negated(reference: str) -> frozenset[str]:
    """Stems a reference denies (to the clause end), denies by a prefix ('non-overlapping') or calls unwanted
    ('reduces idle time'): an answer that denies them agrees ('no overlap')."""
    out = negated_spans(reference, soft=True, width=99)[0]
    for clause in _SCOPE_SPLIT.split(reference):
        toks = raw_tokens(clause)
        out.update(_prefix_denied(toks))
        stems = [stem(t) for t in toks if t not in STOPWORDS]
        for i, s in enumerate(stems):
            if s in _REF_CUES:
                out.update(stems[i + 1 : i + 4])
    return frozenset(out)




@text_cache()  # read twice per answer not graded correct: its covered ideas, then its feedback
def _denials(answer: str, reference: str) -> tuple[tuple[str, frozenset[str]], ...]:
    """Each clause of the answer that denies words the reference asserts, with the stems it denies: a hard
    cue (not, no, never, n't, nobody; not "don't forget") with one of the reference's content words among the
    next three, a word the reference does not deny or call unwanted itself, and that the answer does not
    assert outside its denials ("to all ranks, not just rank 1" is a contrast)."""
    unwanted = reference_negated(reference)
    asserted = [s for s in content_stems(reference) if not has_match(s, unwanted)]
    clauses = _SCOPE_SPLIT.split(answer)
    spans = [negated_spans(clause, soft=False, hard=DENIALS, affirming=_AFFIRMING) for clause in clauses]
    said = [s for _, outside in spans for s in outside]
    hits = [(clause, frozenset(w for w in denied if has_match(w, asserted) and not has_match(w, said)))
            for clause, (denied, _) in zip(clauses, spans, strict=True)]
    return tuple((clause, hit) for clause, hit in hits if hit)


def denying_clause(answer: str, reference: str) -> str | None:
    """The first clause of the answer that denies something the reference asserts (`_denials`); None where
    none does: a negation of something else ("it depends, sometimes it doesn't") says nothing against it."""
    return next((clause for clause, _ in _denials(answer, reference)), None)


def denied_stems(answer: str, reference: str) -> set[str]:
    """The stems of the answer's words that deny what the reference asserts (`_denials`)."""
    return {s for _, hit in _denials(answer, reference) for s in hit}


def negation_mismatch(answer: str, references: list[str], key_stems: list[set[str]]) -> bool:
    """The answer flatly denies a key claim of a reference and does not assert it elsewhere.

    Only hard cues (not, no, never, n't) count in the answer: 'bypasses the CPU' or 'without
    copies' are how correct answers paraphrase. The answer is let off when the text outside
    its negations still covers most of the reference's key stems ('X, not Y' contrasts). A reminder
    ("don't forget set_epoch") or a "not just" / "not only" asserts, and a comma ends a cue's reach."""
    ans_neg, ans_outside = negated_spans(answer, soft=False, affirming=_AFFIRMING)
    if not ans_neg:
        return False
    outside = set(ans_outside)
    for ref, keys in zip(references, key_stems, strict=True):
        ref_neg = reference_negated(ref)
        flipped = {w for w in ans_neg if has_match(w, keys) and not has_match(w, ref_neg)
                   and not has_match(w, outside)}
        if not flipped:
            continue
        denied = negated_stems(ref)
        kept = [k for k in keys if k not in denied]
        covered = sum(1 for k in kept if has_match(k, outside))
        if covered < 0.5 * len(kept):
            return True
    return False


# Words that deny another in themselves: "disjoint" is "non-overlapping".
_PRIVATIVE = {"disjoint": "overlap"}


@text_cache()
def _answer_denied(answer: str) -> frozenset[str]:
    """Stems the answer denies by a hard cue ("no overlap"), by a "non-" prefix ("non-overlapping") or by a
    word that denies one in itself (`_PRIVATIVE`)."""
    denied, _ = negated_spans(answer, soft=False, affirming=_AFFIRMING)
    toks = raw_tokens(answer)
    denied.update(_prefix_denied(toks))
    denied.update(stem(_PRIVATIVE[tok]) for tok in toks if tok in _PRIVATIVE)
    return frozenset(denied)


def denies_disputed(answer: str, wrong: str, references: list[str]) -> bool:
    """Whether the answer denies a word that the wrong option asserts and an accepted answer denies: it
    sides with the accepted answers on the very point the option disputes, so it does not state that
    option's claim, whatever other words they share ("each rank gets a disjoint subset of the indices"
    against "randomly assigns overlapping subsets", where the accepted answer says "non-overlapping")."""
    denied = _answer_denied(answer)
    if not denied:
        return False
    accepted_deny: set[str] = set().union(*(reference_negated(r) for r in references))
    wrong_deny = reference_negated(wrong)
    disputed = {s for s in content_stems(wrong) if has_match(s, accepted_deny) and not has_match(s, wrong_deny)}
    return any(has_match(s, disputed) for s in denied)
