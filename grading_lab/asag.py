"""SemEval-2013 ASAG training data: features for the general model and cross-validation by question."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.config import DATA_DIR
from app.grading import Graders
from app.grading.build import prepare_many
from app.grading.grader import decided, grade_many
from app.grading.rubric import GradingItem, Rubric
from app.grading.scoring import GeneralModel, signals
from app.grading.text import content_stems
from grading_lab.logreg import fit_logistic, macro_f1, standardiser
from ingest.embedder import Encoder

ASAG_DIR = DATA_DIR / "asag"  # the SemEval-2013 training splits (data/asag/README.md)
CACHE_DIR = DATA_DIR / "cache"
CORPORA = ("beetle", "scientsbank")
DOMAIN_WEIGHT = 2.0  # the dev set weighs twice as much, in total, as all the public answers


class CachingEncoder:
    """Wraps an encoder with an on-disk cache keyed by text, so refits never re-embed."""

    def __init__(self, inner: Encoder, path: Path) -> None:
        self.inner, self.path = inner, path
        self.model_id, self.dim = inner.model_id, inner.dim
        self.cache: dict[str, np.ndarray] = {}
        if path.exists():
            data = np.load(path, allow_pickle=False)
            self.cache = dict(zip(data["texts"].tolist(), data["vecs"], strict=True))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for texts, encoding only the ones not cached (in one batch)."""
        missing = sorted({t for t in texts if t not in self.cache})
        if missing:
            self.cache.update(zip(missing, self.inner.encode(missing), strict=True))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.cache[t] for t in texts]).astype(np.float32)

    def save(self) -> None:
        """Write the cache next to the data (data/cache is not committed)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        texts = sorted(self.cache)
        np.savez(self.path, texts=np.array(texts), vecs=np.stack([self.cache[t] for t in texts]))


@dataclass
class Corpus:
    """Labelled answers with their rubrics and features; `domain` marks our own dev set."""

    name: str
    rubrics: dict[str, Rubric]
    question_ids: list[str]
    answers: list[str]
    correct: np.ndarray
    partial_or_better: np.ndarray | None
    features: np.ndarray
    cosines: np.ndarray
    learn: np.ndarray  # rows the model learns from: not already decided by the hard checks
    domain: bool = False


def caching_encoder(encoder: Encoder, name: str) -> CachingEncoder:
    """A cache file per corpus and model."""
    tag = hashlib.sha1(encoder.model_id.encode()).hexdigest()[:10]
    return CachingEncoder(encoder, CACHE_DIR / f"asag_{name}_{tag}.npz")


def answer_features(rubrics: list[Rubric], answers: list[str],
                    encoder: Encoder) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features, plain cosines and whether the hard checks leave the verdict to the model."""
    vecs = encoder.encode(answers)
    feats, cos, learn = [], [], []
    for rubric, text, vec in zip(rubrics, answers, vecs, strict=True):
        sig = signals(rubric, vec, text, content_stems(text))
        feats.append(sig.ref.features)
        cos.append(float((rubric.ref_vecs @ vec).max()))
        learn.append(not decided(rubric, text, vec))
    return np.array(feats), np.array(cos), np.array(learn, dtype=bool)


def load_corpus(name: str, encoder: Encoder) -> Corpus:
    """Read a training split, build rubrics per question and compute every answer's features."""
    rows = [json.loads(line) for line in (ASAG_DIR / f"{name}_train.jsonl").read_text().splitlines()
            if line.strip()]
    cached = caching_encoder(encoder, name)
    items: dict[str, GradingItem] = {}
    for r in rows:
        items.setdefault(r["question_id"], GradingItem(r["question"], list(r["reference_answers"]),
                                                       key=r["question_id"]))
    keys = sorted(items)
    rubrics = dict(zip(keys, prepare_many([items[k] for k in keys], cached, calibrated=False),
                       strict=True))
    answers = [r["student_answer"] for r in rows]
    cached.encode(answers)
    cached.save()
    feats, cos, learn = answer_features([rubrics[r["question_id"]] for r in rows], answers, cached)
    five = [r.get("label_5way") for r in rows]
    partial = None
    if all(five):
        partial = np.array([f in ("correct", "partially_correct_incomplete") for f in five], dtype=float)
    return Corpus(name, rubrics, [r["question_id"] for r in rows], answers,
                  np.array([r["label_2way"] == "correct" for r in rows], dtype=float), partial,
                  feats, cos, learn)


def _balanced(y: np.ndarray) -> np.ndarray:
    pos, neg = max(1.0, float(y.sum())), max(1.0, float(len(y) - y.sum()))
    return np.where(y > 0.5, len(y) / (2 * pos), len(y) / (2 * neg))


def _pooled(parts: list[tuple[np.ndarray, np.ndarray, bool]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stack (x, y, domain) parts; classes balanced within each pool, the domain pool weighted
    DOMAIN_WEIGHT times the public data's total."""
    out_x, out_y, out_w = [], [], []
    pools = {dom: [(x, y) for x, y, d in parts if d == dom and len(y)] for dom in (False, True)}
    totals = {dom: sum(len(y) for _, y in pools[dom]) for dom in pools}
    for dom, chunk in pools.items():
        if not chunk:
            continue
        x, y = np.vstack([c[0] for c in chunk]), np.concatenate([c[1] for c in chunk])
        scale = DOMAIN_WEIGHT * totals[False] / len(y) if dom and totals[False] else 1.0
        out_x.append(x)
        out_y.append(y)
        out_w.append(_balanced(y) * scale)
    return np.vstack(out_x), np.concatenate(out_y), np.concatenate(out_w)


def fit_model(corpora: list[Corpus], rows: list[np.ndarray] | None = None) -> GeneralModel:
    """Fit both heads on the rows the hard checks leave to the model; the partial head on
    corpora with partial labels (Beetle 5-way, the dev set)."""
    rows = rows or [np.arange(len(c.answers)) for c in corpora]
    rows = [r[c.learn[r]] for c, r in zip(corpora, rows, strict=True)]
    x, y, w = _pooled([(c.features[r], c.correct[r], c.domain) for c, r in zip(corpora, rows, strict=True)])
    mean, scale = standardiser(x)
    w_c, b_c = fit_logistic((x - mean) / scale, y, sample_weight=w)
    # The partial head is conditional: among answers that are not correct, which are partly right.
    parts = [(c.features[r][c.correct[r] < 0.5], c.partial_or_better[r][c.correct[r] < 0.5], c.domain)
             for c, r in zip(corpora, rows, strict=True) if c.partial_or_better is not None]
    if parts:
        xp, yp, wp = _pooled(parts)
        w_p, b_p = fit_logistic((xp - mean) / scale, yp, sample_weight=wp)
    else:
        w_p, b_p = w_c, b_c
    return GeneralModel(mean, scale, w_c, b_c, w_p, b_p)


def _best_threshold(scores: np.ndarray, y: np.ndarray) -> float:
    truth = ["c" if v else "i" for v in y]
    best_t, best_f = 0.5, -1.0
    for t in np.unique(np.round(scores, 3)):
        f = macro_f1(truth, ["c" if s >= t else "i" for s in scores], ["c", "i"])
        if f > best_f:
            best_t, best_f = float(t), f
    return best_t


@dataclass
class CrossValResult:
    """Correct-vs-not macro-F1 under cross-validation grouped by question."""

    corpus: str
    folds: int
    grader_f1: float
    cosine_f1: float
    cosine_oracle_f1: float


def asag_crossval(encoder: Encoder, corpus: str = "beetle", folds: int = 5, seed: int = 13,
                  extra: list[Corpus] | None = None) -> CrossValResult:
    """K-fold CV by question: the grader (model fit on the training folds, plus `extra` corpora
    such as the dev set, in every fold) vs a cosine threshold tuned on the training folds."""
    data = load_corpus(corpus, encoder)
    more = extra or []
    qids = sorted(set(data.question_ids))
    random.Random(seed).shuffle(qids)
    fold_of = {q: i % folds for i, q in enumerate(qids)}
    fold = np.array([fold_of[q] for q in data.question_ids])
    truth = ["c" if v else "i" for v in data.correct]
    pred_g = [""] * len(truth)
    pred_c = [""] * len(truth)
    for k in range(folds):
        train, test = np.where(fold != k)[0], np.where(fold == k)[0]
        model = fit_model([data, *more], [train, *(np.arange(len(c.answers)) for c in more)])
        results = grade_many([data.rubrics[data.question_ids[i]] for i in test],
                             [data.answers[i] for i in test], data_encoder(encoder, corpus),
                             graders=Graders(model=model, rules=True))
        t = _best_threshold(data.cosines[train], data.correct[train])
        for i, res in zip(test, results, strict=True):
            pred_g[i] = "c" if res.verdict == "correct" else "i"
            pred_c[i] = "c" if data.cosines[i] >= t else "i"
    oracle_t = _best_threshold(data.cosines, data.correct)
    oracle = ["c" if s >= oracle_t else "i" for s in data.cosines]
    return CrossValResult(corpus, folds, macro_f1(truth, pred_g, ["c", "i"]),
                          macro_f1(truth, pred_c, ["c", "i"]), macro_f1(truth, oracle, ["c", "i"]))


def data_encoder(encoder: Encoder, corpus: str) -> CachingEncoder:
    """The cached encoder for a corpus (answers were embedded when the corpus was loaded)."""
    return caching_encoder(encoder, corpus)


def main() -> None:
    """Print the cross-validation figures for both corpora."""
    from ingest.embedder import SentenceTransformerEncoder

    encoder = SentenceTransformerEncoder()
    for name in CORPORA:
        r = asag_crossval(encoder, name)
        print(f"{name:12s} {r.folds}-fold CV by question, correct-vs-not macro-F1: grader {r.grader_f1:.3f}"
              f"  cosine (threshold from training folds) {r.cosine_f1:.3f}"
              f"  cosine (oracle threshold) {r.cosine_oracle_f1:.3f}")


if __name__ == "__main__":
    main()
