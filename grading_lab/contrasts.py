"""Training pairs made from the bank itself: right answers in many styles, and the near misses.

A judge learns what it is shown. The public ASAG splits hold many real student answers but none
about this domain, and few of the near misses a learner of this domain writes: the same words with
one negation, the two roles of a relation swapped, a true statement that answers another
question, a bare list of terms, one half of a two-part answer. Each generator below turns a bank
question's accepted answers into such pairs, labelled by construction, so that the difference from
a correct answer is the only signal. As many right answers are made as wrong ones (terse, typo'd,
hedged, verbose, the author's other accepted wordings), so that the judge does not learn that a
short or misspelt answer is wrong.

An evasion names the question's subject and claims nothing (`evasion_pairs`): "activation
recomputation is something that matters a lot in multi-GPU training". Each comes beside the same
subject followed by an accepted answer, labelled correct, so that the subject is no sign either way.
They are an option of the judge's recipe (`Recipe.evasions`).

The same near misses are also made from the written right answers (`written_contrasts`): a negation
or a swap of a reference teaches the judge that reference's words; one of a terse, typo'd or
reworded right answer teaches it that the change, not the style, makes the answer wrong. They are
an option of the judge's recipe, off for the shipped judge (measured in docs/GRADING.md).

Nothing here reads the dev or the blind set.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from app.grading.rubric import GradingItem
from app.grading.text import unstopped, without_final_stops


@dataclass(frozen=True)
class Pair:
    """One training example for the judge: a question, one accepted answer, an answer, its label."""

    question: str
    reference: str
    answer: str
    label: str  # correct | partial | incorrect
    kind: str  # how it was made (for the manifest's counts)
    group: str  # the question it belongs to (for grouped splits)


# Role pairs of the domain: an answer naming both, swapped, says the opposite.
ROLE_PAIRS: tuple[tuple[str, str], ...] = (
    ("data", "model"), ("synchronous", "asynchronous"), ("sync", "async"), ("forward", "backward"),
    ("sender", "receiver"), ("send", "receive"), ("stage", "shard"), ("gpipe", "1f1b"),
    ("fp16", "bf16"), ("float16", "bfloat16"), ("exponent", "mantissa"), ("reduce-scatter", "all-gather"),
    ("p2p", "rdma"), ("intra-node", "inter-node"), ("within", "across"), ("nvlink", "infiniband"),
    ("activations", "weights"), ("gradients", "parameters"), ("layers", "batch"), ("cpu", "gpu"),
    ("tensor", "pipeline"), ("experts", "tokens"), ("fewer", "more"), ("smaller", "larger"),
    ("before", "after"), ("first", "last"), ("range", "precision"), ("local", "global"),
    ("rank 0", "every rank"), ("one", "all"), ("memory", "compute"), ("latency", "bandwidth"),
)

# Word-for-word opposites: replacing one flips the claim.
ANTONYMS: dict[str, str] = {
    "increase": "decrease", "increases": "decreases", "decrease": "increase", "decreases": "increases",
    "reduce": "increase", "reduces": "increases", "reducing": "increasing", "more": "less", "less": "more",
    "fewer": "more", "larger": "smaller", "smaller": "larger", "faster": "slower", "slower": "faster",
    "higher": "lower", "lower": "higher", "all": "none of the", "every": "no", "each": "only one",
    "same": "different", "different": "same", "before": "after", "after": "before", "with": "without",
    "without": "with", "avoid": "require", "avoids": "requires", "keep": "discard", "keeps": "discards",
    "overlap": "serialise", "parallel": "sequential", "concurrently": "one after another",
    "split": "replicated", "splits": "replicates", "sharded": "replicated", "shards": "replicates",
    "full": "partial", "entire": "partial", "whole": "partial", "busy": "idle", "idle": "busy",
    "directly": "through the CPU", "bypassing": "going through", "minimise": "maximise",
    "minimize": "maximize", "lowers": "raises", "saves": "costs", "constant": "growing",
}

AUXILIARIES = ("is", "are", "does", "do", "can", "will", "has", "have", "should", "must", "was", "were")

HEDGES = (
    "not sure, something about GPUs",
    "I don't know",
    "no idea sorry",
    "it depends on the setup",
    "something to do with performance I think",
    "that's a good question",
    "it's complicated, there are many factors",
    "skip",
    "I forgot this one",
    "it makes training better",
)

STOPWORDS = frozenset((
    "a", "an", "the", "of", "to", "in", "on", "for", "and", "or", "is", "are", "be", "by", "it", "its", "with",
    "as", "at", "that", "this", "from", "into", "so", "which", "each", "their", "they", "them", "than", "then",
    "while", "when", "can", "will", "does", "do", "not", "no",
))


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9][A-Za-z0-9_\-./()]*", text)


def typo(text: str, rng: random.Random, edits: int = 3) -> str:
    """A few letter slips: a dropped, doubled or swapped letter in longer words."""
    chars = list(text)
    spots = [i for i in range(1, len(chars) - 2) if chars[i].isalpha() and chars[i + 1].isalpha()]
    for i in sorted(rng.sample(spots, min(edits, len(spots))), reverse=True):
        op = rng.randrange(3)
        if op == 0:
            del chars[i]
        elif op == 1:
            chars.insert(i, chars[i])
        else:
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
    return "".join(chars)


def casual(text: str) -> str:
    """Lower case without the final full stop, as people type in a chat box."""
    return text.strip().rstrip(".").lower()


def terse(text: str) -> str:
    """The answer without articles and the verbs 'is'/'are': still a claim, just clipped."""
    kept = [w for w in text.split() if w.lower() not in {"a", "an", "the", "is", "are", "it"}]
    return " ".join(kept)


def negate(text: str, rng: random.Random) -> str | None:
    """The claim denied: an auxiliary with 'not', or one word replaced by its opposite."""
    words = text.split()
    antonym_spots = [i for i, w in enumerate(words) if w.lower().strip(",.;") in ANTONYMS]
    aux_spots = [i for i, w in enumerate(words) if w.lower() in AUXILIARIES]
    if antonym_spots and (not aux_spots or rng.random() < 0.6):
        i = rng.choice(antonym_spots)
        core = words[i].lower().strip(",.;")
        tail = words[i][len(words[i].rstrip(",.;")):]
        words[i] = ANTONYMS[core] + tail
        return " ".join(words)
    if aux_spots:
        i = rng.choice(aux_spots)
        words.insert(i + 1, "not")
        return " ".join(words)
    if words:
        return "It does not " + words[0].lower() + " " + " ".join(words[1:])
    return None


def swap_roles(text: str) -> str | None:
    """The two roles of a relation exchanged, when the answer names both."""
    lower = text.lower()
    for a, b in ROLE_PAIRS:
        pa, pb = rf"\b{re.escape(a)}\b", rf"\b{re.escape(b)}\b"
        conjoined = rf"{pa}\W+(and|or|/|vs\.?)\W+{pb}|{pb}\W+(and|or|/|vs\.?)\W+{pa}"
        if re.search(pa, lower) and re.search(pb, lower) and not re.search(conjoined, lower):
            marker = "\x00"
            swapped = re.sub(pa, marker, text, flags=re.IGNORECASE)
            swapped = re.sub(pb, a, swapped, flags=re.IGNORECASE)
            return swapped.replace(marker, b)
    return None


def keyword_list(text: str, rng: random.Random) -> str | None:
    """The answer's content words, shuffled, as a bare list."""
    words = [w.strip(".,;:()") for w in _words(text)]
    content = list(dict.fromkeys(w for w in words if w.lower() not in STOPWORDS and len(w) > 2))
    if len(content) < 3:
        return None
    rng.shuffle(content)
    return ", ".join(content[: rng.randint(3, min(7, len(content)))])


def halves(text: str) -> list[str]:
    """The parts of a two-part answer ('X and Y', 'X so Y', 'X to Y', 'X; Y'), each long enough to stand alone."""
    for sep in (";", ", so ", " so that ", " so ", ", and ", " and ", " to ", ", which ", " while "):
        if sep in text:
            left, right = text.split(sep, 1)
            if len(left.split()) >= 3 and len(right.split()) >= 3:
                return [left.strip(" ,."), right.strip(" ,.")]
    return []


def bank_pairs(items: Sequence[GradingItem], seed: int = 13) -> list[Pair]:
    """Every generated pair for the bank questions, in a fixed order for a fixed seed."""
    rng = random.Random(seed)
    pairs: list[Pair] = []
    for index, item in enumerate(items):
        pairs += list(_pairs_for(item, items, index, rng))
    return pairs


def _pairs_for(item: GradingItem, items: Sequence[GradingItem], index: int, rng: random.Random) -> Iterator[Pair]:
    group = item.key or item.question
    refs = list(dict.fromkeys(item.reference_answers))

    def pair(reference: str, answer: str, label: str, kind: str) -> Pair:
        return Pair(item.question, reference, answer, label, kind, group)

    for i, ref in enumerate(refs):
        other_refs = [r for r in refs if r != ref] or [ref]
        # Right answers: the same idea in the styles learners write it.
        yield pair(ref, ref, "correct", "identity")
        yield pair(ref, typo(ref, rng), "correct", "typo")
        yield pair(ref, casual(ref), "correct", "casual")
        yield pair(ref, terse(ref), "correct", "terse")
        yield pair(ref, f"I think {casual(ref)}", "correct", "hedged_right")
        if item.explanation:
            yield pair(ref, f"{ref.rstrip('.')}. {item.explanation}", "correct", "verbose")
        if len(refs) > 1:
            yield pair(ref, other_refs[i % len(other_refs)], "correct", "other_wording")
        # Near misses: one change from a right answer.
        for negated in dict.fromkeys([negate(ref, rng), negate(ref, rng)]):
            if negated and negated != ref:
                yield pair(ref, negated, "incorrect", "negation")
        swapped = swap_roles(ref)
        if swapped and swapped.lower() != ref.lower():
            yield pair(ref, swapped, "incorrect", "swapped_roles")
        keywords = keyword_list(ref, rng)
        if keywords:
            yield pair(ref, keywords, "incorrect", "keyword_list")
        for part in halves(ref):
            yield pair(ref, part, "partial", "one_half")
        # Answers that are not about this question at all.
        others = [o for j, o in enumerate(items) if j != index]
        for other in rng.sample(others, min(2, len(others))):
            yield pair(ref, other.reference_answers[0], "incorrect", "other_question")
        yield pair(ref, rng.choice(HEDGES), "incorrect", "hedge")
        for wrong in item.wrong_answers:
            yield pair(ref, wrong, "incorrect", "wrong_option")
            yield pair(ref, typo(casual(wrong), rng, 1), "incorrect", "wrong_option")
    # Labelled examples of the question (an author's, or an accepted appeal's), against its first answer.
    for answer, label in item.examples:
        yield pair(refs[0], answer, label, "example")


def _clauses(text: str) -> set[str]:
    return {c.strip().lower() for c in re.split(r"[;.,]|\band\b", text) if c.strip()}


def written_contrasts(written: Sequence[Pair], seed: int = 13) -> list[Pair]:
    """A negation and a swap of roles of each written right answer, labelled incorrect: the same
    author's style with one change, so the change is the only signal. A swap that leaves the same
    clauses ("DP splits the data; MP splits the model" both ways round) says the same and is dropped,
    and so is a negation that only doubles one ("does not not")."""
    rng = random.Random(seed)
    out: list[Pair] = []
    for p in written:
        if p.label != "correct":
            continue
        negated = negate(p.answer, rng)
        if negated and negated != p.answer and not re.search(r"\b(?:not|n't)\s+not\b", negated):
            out.append(Pair(p.question, p.reference, negated, "incorrect", "written_negation", p.group))
        swapped = swap_roles(p.answer)
        if swapped and _clauses(swapped) != _clauses(p.answer):
            out.append(Pair(p.question, p.reference, swapped, "incorrect", "written_swap", p.group))
    return out


# Openings and closings that say nothing about the answer. In the contrasts above only right answers
# carry one ("I think ..."), and a judge trained on them alone learns the opening as a sign of a right
# answer: a trigger (docs/GRADING.md, "Lead-ins"). `dress` puts one on any answer, right or wrong, with
# its label unchanged. grading_lab/lead_in_probe.py measures the judges with other openings, none of
# them here: keep the two lists apart.
OPENINGS = (
    "I think ", "I believe ", "Frankly, ", "Actually, ", "Obviously, ", "Clearly, ", "Of course, ",
    "As far as I know, ", "If I remember right, ", "From the notes, ", "The way I see it, ", "In my opinion, ",
    "To be fair, ", "Generally, ", "Roughly: ", "Quick answer: ", "Here goes: ", "Hmm, let me think. ",
    "Good question! ", "Easy one: ", "Pretty sure ", "I'd say ", "Definitely: ", "The key point is that ",
    "Yep, ", "Alright so ", "I guess ", "Not 100% sure but ", "Correct answer: ", "This one is simple. ",
    "From what I read, ", "Technically, ", "Fundamentally, ", "Ah, ", "Let me put it this way: ",
)
CLOSINGS = (
    " I think.", " (I believe)", " if I'm not mistaken.", " Hope that helps!", ", right?", " That's it.",
    " Pretty sure.", " :)", " Final answer.", " That's the main idea.",
)


def dress(answer: str, rng: random.Random) -> str:
    """The answer with a content-free opening (three in four) or closing: a lower-case first letter
    after an opening that runs on, unless the first word is an acronym."""
    text = answer.strip()
    if not text or rng.random() < 0.25:
        closing = rng.choice(CLOSINGS)
        stop = "." if closing[1:2].isupper() and text[-1:] not in "!?" else ""
        return text.rstrip(".") + stop + closing
    opening = rng.choice(OPENINGS)
    first = text.split()[0]
    runs_on = opening.endswith((", ", "that ", "so ", "I think ", "I believe ", "sure ", "say ", "guess ", "but "))
    if runs_on and first[:1].isupper() and first[1:] == first[1:].lower():
        text = text[0].lower() + text[1:]
    return opening + text


def dressed(pairs: Sequence[Pair], seed: int) -> list[Pair]:
    """The pairs, each answer dressed (`dress`), the labels kept."""
    rng = random.Random(seed)
    return [Pair(p.question, p.reference, dress(p.answer, rng), p.label, p.kind, p.group) for p in pairs]


def destopped(pairs: Sequence[Pair]) -> list[Pair]:
    """The pairs, each answer without its final full stops (one that is nothing else is kept), the
    labels kept."""
    return [Pair(p.question, p.reference, without_final_stops(p.answer), p.label, p.kind, p.group) for p in pairs]


def restopped(pairs: Sequence[Pair], seed: int) -> list[Pair]:
    """The pairs, each answer ending in a full stop or not at random (even odds), the labels kept: the
    bank's answers end without one and most written ones with one, and a judge trained on them as they
    are reads the stop as a sign of a wrong answer (docs/GRADING_LOG.md, "Final full stops")."""
    rng = random.Random(seed)
    out = []
    for p in pairs:
        bare = unstopped(p.answer)
        stop = rng.random() < 0.5
        answer = p.answer if not bare or bare[-1] in "!?" else bare + "." if stop else bare
        out.append(Pair(p.question, p.reference, answer, p.label, p.kind, p.group))
    return out


# Evasions: the question's own subject in a frame that says nothing this question's answer says. Both
# judges read most written evasions as partial (docs/GRADING_LOG.md, "Evasions and partial answers,
# tried"): their training answers that are wrong differ from a right one by a claim, and an answer with
# no claim at all was only ever one of the fixed HEDGES above, which name no subject.
EVASION_FRAMES = (
    "{t} is something that matters a lot in multi-GPU training",
    "it's about {t}, and it really depends on the setup",
    "{t} is a technique used in distributed training to make things faster",
    "{t} has to do with how the GPUs work together",
    "basically {t}, it helps with performance at scale",
    "{t}: there are pros and cons, it depends on the model and the hardware",
    "well {t} is an important concept for large models",
    "{t} is used when you train on many GPUs, it's part of the framework",
    "I remember {t} from the lecture, it's about efficiency",
    "{t} is one of the key ideas of distributed training",
    "you need {t} for big training jobs, otherwise things get slow",
    "{t} is handled by the library, so you usually don't have to think about it",
    "in short {t} is an optimization for multi-node clusters",
    "{t} comes up with large language models on GPU clusters",
)
# The question's subject: a quoted term where there is one, else the question without its
# question words and without what it asks of its subject.
_QUOTED = re.compile(r"(?<![A-Za-z])'([^']{3,})'")
_ASKING = re.compile(
    r"^(?:in [^,]+,\s*)?(?:what|which|how|why|when|where)\s+"
    r"(?:is|are|does|do|did|can|problem does|combination of parallelism is|software layer|"
    r"NVIDIA (?:framework|GPU) feature|metric|technique)?\s*", re.IGNORECASE)
_ASKS_OF = re.compile(
    r"\s+(?:and\s+(?:what|which|why|how|where|when)|and\s+its|refer|enable|allow|ensure|handle|interact|differ|"
    r"reduce|mitigate|solve|sit|quantif|typically|used|in the context|in a |in multi|in large|in NVIDIA|"
    r"for distributed|for GPU|do\b|mean)\b.*$|,\s*(?:which|what)\b.*$", re.IGNORECASE)
_ASKED_VERB = re.compile(r"^(?:allows|enables|best quantifies|reduces latency by)\s+", re.IGNORECASE)


def question_subject(question: str) -> str | None:
    """What the question is about, in its own words ('pipeline bubble', 'the difference between data
    parallelism and model parallelism'), or None where nothing of three letters or more is left."""
    quoted = _QUOTED.search(question)
    if quoted:
        return quoted.group(1)
    text = question.strip().rstrip("?")
    text = _ASKED_VERB.sub("", _ASKING.sub("", text))
    text = _ASKS_OF.sub("", text).strip(" ,")
    return text if len(text) >= 3 else None


def evasion_pairs(items: Sequence[GradingItem], seed: int = 13) -> list[Pair]:
    """For each accepted answer of each bank question, two evasions that name the question's subject and
    say nothing of the answer (incorrect), and the same subject followed by the accepted answer
    (correct), so that naming the subject is no sign either way and the claim after it is the signal."""
    rng = random.Random(seed)
    out: list[Pair] = []
    for item in items:
        subject = question_subject(item.question)
        if subject is None:
            continue
        group = item.key or item.question
        for ref in dict.fromkeys(item.reference_answers):
            for frame in rng.sample(EVASION_FRAMES, 2):
                evasion = frame.format(t=subject)
                out.append(Pair(item.question, ref, evasion[0].upper() + evasion[1:], "incorrect", "evasion", group))
            out.append(Pair(item.question, ref, f"{subject}: {casual(ref)}", "correct", "subject_then_answer", group))
    return out
