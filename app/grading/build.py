"""Build rubrics: one batched encode per call, key ideas, role clauses, per-question calibration."""

from __future__ import annotations

import numpy as np

from app.grading.align import key_ideas, weigh
from app.grading.judge import caught
from app.grading.roles import reference_clauses
from app.grading.rubric import GradingItem, Rubric
from app.grading.scoring import GeneralModel, load_model, signals
from app.grading.text import StemSet, content_stems
from ingest.embedder import Encoder

MARGIN = 0.5  # logit margin wanted between calibration positives/negatives and the threshold
MAX_SHIFT = 1.0  # per-question offsets stay near the general model's threshold


def _ideas(item: GradingItem) -> list[list[str]]:
    return [key_ideas(r, item.question) or [r] for r in item.reference_answers]


def _texts(item: GradingItem) -> list[str]:
    texts = [item.question, *item.reference_answers, *item.wrong_answers]
    texts += [a for a, _ in item.examples]
    texts += [idea for ideas in _ideas(item) for idea in ideas]
    if item.explanation:
        texts.append(item.explanation)
    return texts


def _build(item: GradingItem, vecs: np.ndarray, model_id: str) -> Rubric:
    n_ref, n_wrong, n_ex = len(item.reference_answers), len(item.wrong_answers), len(item.examples)
    at = 1
    ref_vecs = vecs[at : at + n_ref]
    at += n_ref
    wrong_vecs = vecs[at : at + n_wrong]
    at += n_wrong
    example_vecs = vecs[at : at + n_ex]
    at += n_ex
    ideas = _ideas(item)
    n_ideas = sum(len(i) for i in ideas)
    idea_vecs = vecs[at : at + n_ideas]
    at += n_ideas
    expl_vec = vecs[at] if item.explanation else None
    vocab = set(content_stems(item.question))
    for text in [*item.reference_answers, item.explanation or ""]:
        vocab.update(content_stems(text))
    return Rubric(
        item=item,
        model_id=model_id,
        ref_vecs=ref_vecs,
        wrong_vecs=wrong_vecs,
        example_vecs=example_vecs,
        question_vec=vecs[0],
        expl_vec=expl_vec,
        ref_stems=[weigh(r, item.question) for r in item.reference_answers],
        wrong_stems=[weigh(w, item.question) for w in item.wrong_answers],
        vocabulary=StemSet(vocab, remember=False),
        ideas=ideas,
        idea_vecs=idea_vecs,
        clauses=[reference_clauses(r, item.question) for r in item.reference_answers],
    )


def _shift(positives: list[float], negatives: list[float]) -> float:
    """Offset that moves the threshold away from known negatives and below known positives."""
    down = min(0.0, -(max(negatives) + MARGIN)) if negatives else 0.0
    up = max(0.0, MARGIN - min(positives)) if positives else 0.0
    shift = (down + up) / 2 if down and up else down + up
    return float(np.clip(shift, -MAX_SHIFT, MAX_SHIFT))


def calibrate(rubric: Rubric, vecs: np.ndarray, model: GeneralModel) -> None:
    """Set per-question offsets from the explanation, wrong answers and labelled examples."""
    item = rubric.item
    # Wrong options are not threshold negatives: they reuse the accepted answer's wording, so
    # raising the threshold past them rejected correct paraphrases on the dev set; they act
    # through the contrast check instead (an answer nearer a wrong option is not correct).
    labelled: list[tuple[str, str, np.ndarray, int]] = []
    n_ref, n_wrong = len(item.reference_answers), len(item.wrong_answers)
    for j, (answer, label) in enumerate(item.examples):
        labelled.append((answer, label, vecs[1 + n_ref + n_wrong + j], -1))
    if item.explanation is not None and rubric.expl_vec is not None:
        labelled.append((item.explanation, "correct", rubric.expl_vec, -1))
    pos_c: list[float] = []
    neg_c: list[float] = []
    pos_p: list[float] = []
    neg_p: list[float] = []
    for text, label, vec, skip in labelled:
        sig = signals(rubric, vec, text, content_stems(text), read_words=False)
        if label == "incorrect" and caught(rubric, text, sig, skip):
            continue  # the hard checks already reject it; the threshold need not move for it
        z_c, z_p = model.logits(sig.ref.features)
        (pos_c if label == "correct" else neg_c).append(z_c)
        (pos_p if label in ("correct", "partial") else neg_p).append(z_p)
    rubric.offset_correct = _shift(pos_c, neg_c)
    rubric.offset_partial = _shift(pos_p, neg_p)


def prepare_many(items: list[GradingItem], encoder: Encoder, model: GeneralModel | None = None,
                 calibrated: bool = True) -> list[Rubric]:
    """Rubrics for many items from one batched encoder call."""
    if calibrated and model is None:
        model = load_model()
    texts: list[str] = []
    spans: list[tuple[int, int]] = []
    for item in items:
        if not item.reference_answers:
            raise ValueError(f"item {item.key or item.question!r} has no reference answer")
        chunk = _texts(item)
        spans.append((len(texts), len(texts) + len(chunk)))
        texts.extend(chunk)
    vecs = encoder.encode(texts) if texts else np.zeros((0, encoder.dim), dtype=np.float32)
    rubrics = []
    for item, (lo, hi) in zip(items, spans, strict=True):
        rubric = _build(item, vecs[lo:hi], encoder.model_id)
        if model is not None and calibrated:
            calibrate(rubric, vecs[lo:hi], model)
        rubrics.append(rubric)
    return rubrics


def prepare(item: GradingItem, encoder: Encoder) -> Rubric:
    """The rubric for one item; all of its encoder work happens here, in one batch."""
    return prepare_many([item], encoder)[0]
