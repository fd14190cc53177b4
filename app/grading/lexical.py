"""What a question's labelled examples say in their words: a small classifier fitted per question.

Where a caller passes many labelled answers to one question (the public "unseen answers" splits, a course
that marked last year's answers), which words and spellings go with a right answer is something the
examples themselves teach: "closed path" and "terminal" in a circuit question, "not" beside the word the
right answers assert. The sentence vectors and the word overlap with the nearest examples (app/grading/
examples.py) read closeness, not which words tell the classes apart. This module fits, once per question,
an L2-regularised logistic regression over the examples' words (content stems, a mark for a negation, and
character 4-grams, which keep typos and word forms near their right spelling), and reads a new answer's
log-odds of being correct with it. The example head weighs that log-odds with its other inputs
(`examples.FEATURES`, "words"); how much it adds is measured in grouped CV by
`python -m grading_lab.examples_fit` (docs/GRADING_LOG.md, "The examples' words, per question
(examples-13)").

Each question has a few dozen examples and thousands of distinct features, so the Newton steps are solved in
the examples' space (the Woodbury identity). A fit over 200 examples takes about 20 ms on 2 cores, most of it
the examples' features, so the models of the last few sets of examples are kept (`model_for`): a caller who
grades many answers to one question passes the same examples with each (bench/bench_examples.py).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import cachetools
import numpy as np

from app.grading.text import NEGATIONS, content_stems, raw_tokens

L2 = 1.0  # the penalty on the word weights (grouped CV moved little between 0.3 and 3)
BIAS_L2 = 1e-4  # the bias is all but free
CHAR_GRAMS = 4
NEGATED = "<not>"  # the feature of an answer that holds a negation word
MAX_LOG_ODDS = 8.0  # what one reading can say, either way
ITERATIONS = 50
KEPT_MODELS = 32  # the models of this many sets of examples are kept, the least recently used dropped first


def words(text: str) -> frozenset[str]:
    """The classifier's features of a text: its content stems, NEGATED if it holds a negation word, and the
    character 4-grams of its folded words (stopwords kept, words joined by single spaces)."""
    tokens = raw_tokens(text)
    out = set(content_stems(text))
    if any(t in NEGATIONS for t in tokens):
        out.add(NEGATED)
    joined = f" {' '.join(tokens)} "
    out.update("#" + joined[i:i + CHAR_GRAMS] for i in range(len(joined) - CHAR_GRAMS + 1))
    return frozenset(out)


def fit_wide_logistic(x: np.ndarray, y: np.ndarray, l2: float = L2, bias_l2: float = BIAS_L2,
                      iterations: int = ITERATIONS) -> tuple[np.ndarray, float]:
    """Weights and bias of an L2-regularised logistic regression with balanced class weights, for far fewer
    rows than columns: each Newton step solves an n-by-n system (the Woodbury identity) in place of a d-by-d
    one. Agrees with grading_lab.logreg.fit_logistic where both apply (tests/app/grading/test_lexical.py)."""
    n, d = x.shape
    a = np.hstack([x, np.ones((n, 1))])
    pos, neg = max(1.0, float(y.sum())), max(1.0, float(n - y.sum()))
    sample_w = np.where(y > 0.5, n / (2 * pos), n / (2 * neg))
    reg = np.full(d + 1, l2)
    reg[-1] = bias_l2
    gram = (a / reg) @ a.T  # A D^-1 A^T, with D the penalties
    theta = np.zeros(d + 1)
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(a @ theta, -30, 30)))
        grad = a.T @ (sample_w * (p - y)) + reg * theta
        s = np.sqrt(sample_w * p * (1 - p))
        inner = np.eye(n) + s[:, None] * gram * s[None, :]
        scaled = grad / reg
        step = scaled - (a.T @ (s * np.linalg.solve(inner, s * (a @ scaled)))) / reg
        theta -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return theta[:-1], float(theta[-1])


@dataclass(frozen=True)
class WordModel:
    """One question's classifier over its labelled examples' words."""

    vocabulary: dict[str, int]
    weights: np.ndarray
    bias: float

    @classmethod
    def fit(cls, examples: Sequence[tuple[str, str]]) -> WordModel | None:
        """The classifier of examples labelled `correct` against the rest; None unless both kinds are there."""
        good = np.array([label == "correct" for _, label in examples], dtype=float)
        if not 0 < good.sum() < len(good):
            return None
        feats = [words(answer) for answer, _ in examples]
        vocabulary = {w: j for j, w in enumerate(sorted(set().union(*feats)))}
        x = np.zeros((len(feats), len(vocabulary)))
        for row, f in enumerate(feats):
            x[row, [vocabulary[w] for w in f]] = 1.0
        weights, bias = fit_wide_logistic(x, good)
        return cls(vocabulary, weights, bias)

    def log_odds(self, text: str) -> float:
        """The log-odds that an answer is correct, as the examples' words read it (within MAX_LOG_ODDS)."""
        idx = [self.vocabulary[w] for w in words(text) if w in self.vocabulary]
        z = float(self.weights[idx].sum()) + self.bias
        return max(-MAX_LOG_ODDS, min(MAX_LOG_ODDS, z))


_models: cachetools.LRUCache[str, WordModel | None] = cachetools.LRUCache(maxsize=KEPT_MODELS)
_models_lock = threading.Lock()


def model_for(examples: Sequence[tuple[str, str]]) -> WordModel | None:
    """`WordModel.fit` of these examples, kept for the next call that passes the same ones (by their digest)."""
    key = hashlib.sha256(json.dumps([list(e) for e in examples]).encode("utf-8")).hexdigest()
    with _models_lock:
        if key in _models:
            return _models[key]
    model = WordModel.fit(examples)
    with _models_lock:
        _models[key] = model
    return model
