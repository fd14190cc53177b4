"""Intent recognition: at least five phrasings per intent, paraphrases and misspellings included."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.chat.intents import IntentModel, recognise
from app.chat.text import edit_distance, normalise, phrase_score, same_word
from app.chat.vocab import Vocabulary, vocabulary
from ingest.embedder import Encoder
from tests.conftest import ROOT
from tests.fakes import FakeEncoder

PHRASINGS: dict[str, list[str]] = {
    "quiz": ["quiz me", "quizz me pls", "test my knowldge", "can you ask me some questions", "I'd like to practise",
             "let's do a quiz"],
    "harder": ["give me something harder", "harderr", "make it more dificult", "this is too easy",
               "I want a tougher one", "challenge me"],
    "hint": ["hint", "hnit please", "gimme a clue", "can i get a hint?", "I'm stuck, help", "any tip?"],
    "explain": ["why?", "explain", "expalin that please", "why was i wrong?", "how come?", "can you elaborate"],
    "skip": ["skip", "skp", "pass", "i dont know", "idk", "I give up", "show me the answer"],
    "demo": ["show me", "run the all-reduce demo", "shwo me the pipeline demo", "can I see a demo of zero",
             "run the demo please", "show me the ring all reduce in action", "demo the sampler"],
    "progress": ["how am I doing?", "hwo am i doin", "show my progress", "what's my score", "how far along am I",
                 "my stats pls"],
    "ask": ["what is reduce-scatter?", "how is FSDP different from DDP?", "explain the ring all-reduce algorithm",
            "why does the pipeline bubble shrink with more micro-batches?", "what does NCCL do",
            "tell me about tensor parallelism"],
}
ANSWERS = [
    "it splits the batch into smaller pieces so stages overlap",
    "data parallelism",
    "the all-reduce sums gradients",
    "idle time at the stages",
    "skip connections",
    "show the gradient to all ranks",
    "it passes activations to the next stage",
]
CASES = [(kind, text) for kind, texts in PHRASINGS.items() for text in texts]


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    return vocabulary(ROOT / "data" / "taxonomy.yaml")


def _check(model: IntentModel, vocab: Vocabulary, kind: str, text: str) -> None:
    intent = recognise(text, pending=False, has_options=False, vocab=vocab, model=model)
    assert intent.kind == kind, (text, intent)


@pytest.mark.parametrize(("kind", "text"), CASES)
def test_intents_with_phrase_matching_alone(vocab: Vocabulary, kind: str, text: str) -> None:
    _check(IntentModel(None), vocab, kind, text)


@pytest.mark.parametrize(("kind", "text"), CASES)
def test_intents_with_the_fake_encoder(vocab: Vocabulary, kind: str, text: str) -> None:
    _check(IntentModel(FakeEncoder()), vocab, kind, text)


@pytest.mark.slow
def test_intents_with_the_real_model(vocab: Vocabulary, real_encoder: Encoder) -> None:
    model = IntentModel(real_encoder)
    for kind, text in CASES:
        _check(model, vocab, kind, text)
    # Paraphrases with no word in common with any example: only the embeddings can get these.
    for kind, text in [("quiz", "could you examine my understanding"), ("progress", "am I improving at all")]:
        intent = recognise(text, pending=False, has_options=False, vocab=vocab, model=model)
        assert intent.kind in (kind, "ask"), (text, intent)
    for text in ANSWERS:
        assert recognise(text, pending=True, has_options=False, vocab=vocab, model=model).kind == "answer", text


@pytest.mark.parametrize("text", ANSWERS)
def test_a_pending_question_takes_free_text_as_the_answer(vocab: Vocabulary, text: str) -> None:
    assert recognise(text, pending=True, has_options=False, vocab=vocab, model=IntentModel(None)).kind == "answer"


@pytest.mark.parametrize(("text", "letter"), [("B", "B"), ("c)", "C"), ("it's a", "A"), ("option d", "D")])
def test_a_letter_picks_an_option(vocab: Vocabulary, text: str, letter: str) -> None:
    intent = recognise(text, pending=True, has_options=True, vocab=vocab, model=IntentModel(None))
    assert (intent.kind, intent.choice) == ("answer", letter)


def test_commands_still_work_while_a_question_waits(vocab: Vocabulary) -> None:
    model = IntentModel(None)
    for text, kind in [("hint pls", "hint"), ("skip", "skip"), ("how am i doing", "progress"),
                       ("what is reduce-scatter?", "ask"), ("why?", "explain")]:
        assert recognise(text, pending=True, has_options=True, vocab=vocab, model=model).kind == kind, text


@pytest.mark.parametrize(
    ("text", "topic"),
    [
        ("quiz me on pipeline parallelism", "pipeline-parallelism"),
        ("qiuz me on pipline paralelism", "pipeline-parallelism"),
        ("quiz me about fsdp", "zero-fsdp"),
        ("give me a question about nccl", "collectives"),
        ("let's do a quiz on mixed precison", "mixed-precision"),
        ("test me on data-parallel training", "data-parallelism"),
    ],
)
def test_quiz_topics_are_found_despite_typos(vocab: Vocabulary, text: str, topic: str) -> None:
    intent = recognise(text, pending=False, has_options=False, vocab=vocab, model=IntentModel(None))
    assert (intent.kind, intent.topic) == ("quiz", topic)


def test_an_unknown_quiz_topic_is_reported(vocab: Vocabulary) -> None:
    intent = recognise("quiz me on french cooking", pending=False, has_options=False, vocab=vocab,
                       model=IntentModel(None))
    assert intent.kind == "quiz" and intent.topic is None and intent.unknown_topic == "french cooking"


@pytest.mark.parametrize(
    ("text", "demo"),
    [("run the all-reduce demo", "allreduce"), ("run the all reduce demo", "allreduce"),
     ("show me pipeline bubbles", "pipeline"), ("demo zero sharding", "zero"),
     ("run the fp16 demo", "mixed_precision")],
)
def test_demo_names_are_found(vocab: Vocabulary, text: str, demo: str) -> None:
    intent = recognise(text, pending=False, has_options=False, vocab=vocab, model=IntentModel(None))
    assert (intent.kind, intent.demo) == ("demo", demo)


def test_text_helpers() -> None:
    assert normalise("Run the All-Reduce demo, PLS!") == "run the allreduce demo please"
    assert edit_distance("hwo", "how") == 1 and edit_distance("quiz", "quiz") == 0
    assert same_word("qiuz", "quiz") and same_word("knowldge", "knowledge") and not same_word("me", "my")
    assert same_word("parallel*", "parallelism") and not same_word("moe", "more", typo_from=5)
    assert phrase_score(["quiz"], ["quiz"]) == 1.0 and phrase_score([], ["quiz"]) == 0.0


def test_a_missing_taxonomy_gives_an_empty_vocabulary(tmp_path: Path) -> None:
    assert vocabulary(tmp_path / "none.yaml").topic(["pipeline"]) is None
