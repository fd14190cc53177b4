"""Train the pair judge: a cross-encoder that reads (question + accepted answer, answer) together.

`tutor models train-judge` runs `train_judge`: it fine-tunes the bundled MiniLM weights on

- the SemEval-2013 training splits in data/asag/ (Beetle's 5-way labels give real partial and
  contradictory answers; SciEntsBank's 2-way labels real correct and incorrect ones), and
- the bank's contrast pairs (grading_lab/contrasts.py), repeated BANK_REPEAT times,

then exports it to int8 ONNX under models/judge/ with a manifest of the recipe, the data hashes and
the figures. The dev set is never trained on (it calibrates the decision that uses the judge), and
the blind set is never read here. Fixed seeds: the same data gives the same weights on one machine
(PyTorch's CPU kernels may differ in the last bits between machines).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from app.config import DATA_DIR, JUDGE_DIR, PROJECT_ROOT
from app.grading.pairjudge import JUDGE_LABELS, MANIFEST, MAX_LENGTH, ONNX_FILE, PairJudge, pair_text
from app.grading.rubric import GradingItem
from grading_lab.asag import ASAG_DIR
from grading_lab.contrasts import Pair, bank_pairs, destopped, dressed, evasion_pairs, restopped, written_contrasts
from grading_lab.evaluation import bank_items
from ingest.embedder import resolve_model_path
from ingest.identity import file_sha256

RECIPE_VERSION = "pair-judge-4"
BANK_ANSWERS = DATA_DIR / "train" / "bank_answers.jsonl"
# Written answers that also train the grader's decision (grading_lab/decision_fit.py). The decision
# must see the judge's reading of an answer the judge was not trained on, so these are cross-fitted:
# CROSSFIT_FOLDS judges, each trained without one fold of questions' answers, read that fold.
DECISION_ANSWERS = tuple(sorted((DATA_DIR / "train").glob("decision_answers_*.jsonl")))
CROSSFIT_FOLDS = 2
CROSSFIT_DIR = DATA_DIR / "cache" / "judge-crossfit"  # the fold judges (not shipped; rebuilt on demand)
LATE_CROSSFIT_DIR = DATA_DIR / "cache" / "late-crossfit"  # the late judge's fold judges, for the bank decision


@dataclass(frozen=True)
class Recipe:
    """How the judge is trained; recorded in its manifest."""

    base_model: str = "sentence-transformers/all-MiniLM-L6-v2"
    seed: int = 13
    epochs: int = 2
    batch_size: int = 16
    learning_rate: float = 4e-5
    warmup: float = 0.1
    max_length: int = MAX_LENGTH
    bank_repeat: int = 4  # the bank's contrast pairs weigh this many times one pass
    answers_repeat: int = 3  # and the written training answers (data/train/) this many
    # A negation and a swap of each written right answer (grading_lab/contrasts.py: written_contrasts),
    # this many times one pass. 0 for the shipped judge: at 2 the judge alone on the dev set fell from
    # 0.777 / 0.903 to 0.742 / 0.870 (docs/GRADING_LOG.md, "Other tries").
    written_contrasts_repeat: int = 0
    # Beetle only: its 5-way labels tell partial from contradictory answers. SciEntsBank's 2-way
    # "incorrect" lumps partially right answers with wrong ones, and taught the judge that an answer
    # in other words than the reference is wrong.
    asag: tuple[str, ...] = ("beetle",)
    version: str = RECIPE_VERSION
    # For a grouped held-out figure: leave out this fold (of HOLDOUT_FOLDS, by question) of the ASAG pairs.
    holdout: int | None = None
    # Train on the decision's written answers too (DECISION_ANSWERS), less this fold of questions
    # (of CROSSFIT_FOLDS) when it is set.
    decision_answers: bool = True
    crossfit: int | None = None
    # Keep only the base model's first `layers` transformer layers (None: all of them): a shallower
    # judge costs proportionally less per graded answer.
    layers: int | None = None
    # The judge's first text carries the question after the accepted answer (False: the accepted
    # answer alone, a shorter input and so a cheaper pass; app/grading/pairjudge.py: pair_text).
    question: bool = True
    # Distil from a trained judge (`teacher`, its folder relative to the project): the loss is this
    # weight of the KL divergence from the teacher's probabilities, softened by DISTIL_TEMPERATURE, and
    # the rest the labels' (0: the labels alone).
    distil: float = 0.0
    teacher: str = ""
    # A late judge (grading_lab/late_judge.py) instead of a cross-encoder: the serving encoder's first
    # `late_split` layers, frozen, read each text alone, and the last ones read the two together.
    late_split: int | None = None
    # Of the bank_repeat and answers_repeat passes over the bank's and the written pairs, this many
    # carry a content-free opening or closing on every answer, right and wrong alike, the label kept
    # (grading_lab/contrasts.py: dress), so that no opening is a sign of a right answer. 0 for the
    # shipped judge: at 1 the grader resisted openings it was never shown but lost a little on plain
    # answers, and the foreign head would need refitting (docs/GRADING_LOG.md, "Lead-ins in the judge's
    # training").
    lead_ins: int = 0
    # Every training answer ends in a full stop or not at random, the label kept (grading_lab/contrasts.py:
    # restopped), so that the stop is no sign of either. False for the shipped judge, which never sees one
    # (no_stops; docs/GRADING_LOG.md, "Final full stops").
    random_stops: bool = False
    # Every training answer without its final full stops (grading_lab/contrasts.py: destopped), as the
    # grader reads answers (app/grading/grader.py: _precheck): the project's written answers end in a
    # stop far more often when they are wrong (docs/GRADING_LOG.md, "Final full stops"), and a judge that
    # never sees one cannot take it for a sign of either. A manifest without the field predates it (False).
    no_stops: bool = True
    # The bank's evasions (grading_lab/contrasts.py: evasion_pairs), bank_repeat times one pass: the
    # question's subject in a frame that claims nothing (incorrect), beside the subject followed by an
    # accepted answer (correct). False for the shipped judges: a late judge trained with them read the
    # dev set's evasions no better and its typo'd right answers worse (docs/GRADING_LOG.md, "Evasions and
    # partial answers, tried").
    evasions: bool = False


# The late judge's recipe (`tutor models train-judge --late`): four frozen layers and two joined. The
# pair judge's learning rate and epochs undertrain the two joined layers (alone on the dev set 0.640 /
# 0.864 against 0.735 / 0.899; docs/GRADING_LOG.md, "Cheaper judges, side by side").
LATE_RECIPE = Recipe(late_split=4, epochs=3, learning_rate=1e-4, version="late-judge-2")
HOLDOUT_FOLDS = 5
DISTIL_TEMPERATURE = 2.0


def recipe_of(manifest: dict[str, Any]) -> Recipe:
    """The recipe a judge's manifest records; a field newer than the manifest reads as its default
    (a new option defaults to what judges did before it), and a field Recipe no longer has is an error."""
    recorded = dict(manifest["recipe"])
    unknown = set(recorded) - set(asdict(Recipe()))
    if unknown:
        raise ValueError(f"the judge's recipe has fields this code does not know: {sorted(unknown)}")
    if "asag" in recorded:
        recorded["asag"] = tuple(recorded["asag"])
    recorded.setdefault("no_stops", False)  # judges before the option read answers as written
    recorded.setdefault("evasions", False)  # and without the bank's evasions
    return Recipe(**recorded)


def holdout_fold(group: str, seed: int, folds: int = HOLDOUT_FOLDS) -> int:
    """The fold of a question (stable across runs: a hash of its id and the seed)."""
    return int(hashlib.sha256(f"{seed}:{group}".encode()).hexdigest(), 16) % folds


def crossfit_fold(file: str, number: int, seed: int = Recipe.seed) -> int:
    """The cross-fitting fold of a bank question."""
    return holdout_fold(f"{file}#{number}", seed, CROSSFIT_FOLDS)


def asag_label(row: dict[str, Any]) -> str:
    five = row.get("label_5way")
    if five:
        return {"correct": "correct", "partially_correct_incomplete": "partial"}.get(five, "incorrect")
    return "correct" if row["label_2way"] == "correct" else "incorrect"


def asag_pairs(names: Sequence[str], directory: Path = ASAG_DIR) -> list[Pair]:
    """The public training answers as pairs with their question's first reference answer."""
    pairs = []
    for name in names:
        for line in (directory / f"{name}_train.jsonl").read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            pairs.append(Pair(row["question"], row["reference_answers"][0], row["student_answer"],
                              asag_label(row), f"{name}", f"{name}:{row['question_id']}"))
    return pairs


def data_hashes(recipe: Recipe) -> dict[str, str]:
    """sha256 of every file the training reads."""
    files = [
        *(ASAG_DIR / f"{n}_train.jsonl" for n in recipe.asag),
        BANK_ANSWERS,
        *(DECISION_ANSWERS if recipe.decision_answers else ()),
        *sorted((DATA_DIR / "raw").glob("*.txt")),
        DATA_DIR / "annotations.yaml",
        *((PROJECT_ROOT / recipe.teacher / ONNX_FILE,) if recipe.distil else ()),
    ]
    return {str(f.relative_to(PROJECT_ROOT)): file_sha256(f) for f in files}


def teacher_logits(recipe: Recipe, pairs: Sequence[Pair]) -> dict[tuple[str, str, str], np.ndarray]:
    """The teacher judge's log-probabilities of each distinct (question, accepted answer, answer), read
    as the served judge reads them (one pair per run), for distillation."""
    triples = list(dict.fromkeys((p.question, p.reference, p.answer) for p in pairs))
    logs = np.log(np.maximum(PairJudge(PROJECT_ROOT / recipe.teacher).probabilities(triples), 1e-6))
    return dict(zip(triples, logs, strict=True))


def answer_pairs(items: dict[tuple[str, int], GradingItem], path: Path = BANK_ANSWERS,
                 skip_fold: int | None = None, seed: int = Recipe.seed) -> list[Pair]:
    """Written training answers to the bank's questions (data/train/README.md), each paired with the
    question's last accepted answer: an author's accurate wording where the seed's is loose. With
    `skip_fold`, the answers to that cross-fitting fold's questions are left out."""
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if skip_fold is not None and crossfit_fold(row["file"], int(row["number"]), seed) == skip_fold:
            continue
        item = items[(row["file"], int(row["number"]))]
        pairs.append(Pair(item.question, item.reference_answers[-1], row["answer"], row["label"],
                          f"written:{row['kind']}", item.key or item.question))
    return pairs


def training_pairs(recipe: Recipe) -> list[Pair]:
    """The public pairs (less the held-out fold, if any), the bank's contrast pairs and the written
    training answers, each repeated as the recipe says."""
    items = bank_items()
    ordered = [items[k] for k in sorted(items)]
    bank = bank_pairs(ordered, seed=recipe.seed) + (evasion_pairs(ordered, recipe.seed) if recipe.evasions else [])
    public = [p for p in asag_pairs(recipe.asag)
              if recipe.holdout is None or holdout_fold(p.group, recipe.seed) != recipe.holdout]
    written = answer_pairs(items)
    if recipe.decision_answers:
        for path in DECISION_ANSWERS:
            written += answer_pairs(items, path, recipe.crossfit, recipe.seed)
    contrasts = written_contrasts(written, recipe.seed) if recipe.written_contrasts_repeat else []
    dressed_bank = dressed(bank, recipe.seed) * recipe.lead_ins
    dressed_written = dressed(written, recipe.seed + 1) * recipe.lead_ins
    pairs = (public + bank * (recipe.bank_repeat - recipe.lead_ins) + dressed_bank
             + written * (recipe.answers_repeat - recipe.lead_ins) + dressed_written
             + contrasts * recipe.written_contrasts_repeat)
    if recipe.random_stops:
        return restopped(pairs, recipe.seed + 2)
    return destopped(pairs) if recipe.no_stops else pairs


def heldout_figures(judge: PairJudge, recipe: Recipe) -> dict[str, Any]:
    """The judge's macro-F1 on the ASAG questions it was not trained on, per corpus (2-way for both,
    3-way for Beetle, whose 5-way labels give partial answers)."""
    from grading_lab.logreg import macro_f1

    out: dict[str, Any] = {}
    for name in recipe.asag:
        pairs = [p for p in asag_pairs([name]) if holdout_fold(p.group, recipe.seed) == recipe.holdout]
        probs = judge.probabilities([(p.question, p.reference, p.answer) for p in pairs])
        pred = [JUDGE_LABELS[i] for i in probs.argmax(axis=1)]
        truth = [p.label for p in pairs]
        two = lambda labels: ["correct" if v == "correct" else "not" for v in labels]  # noqa: E731
        out[name] = {"answers": len(pairs), "questions": len({p.group for p in pairs}),
                     "macro_f1_2": round(macro_f1(two(truth), two(pred), ["correct", "not"]), 4)}
        if name == "beetle":
            out[name]["macro_f1_3"] = round(macro_f1(truth, pred, list(JUDGE_LABELS)), 4)
    return out


def dev_triples() -> tuple[list[dict[str, Any]], list[tuple[str, str, str]]]:
    """The dev set's rows, and each as the judge reads it: (question, last accepted answer, answer)."""
    items = bank_items()
    rows = [json.loads(line) for line in (DATA_DIR / "eval" / "dev.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    triples = []
    for row in rows:
        item = items[(row["file"], int(row["number"]))]
        triples.append((item.question, item.reference_answers[-1], row["answer"]))
    return rows, triples


def dev_figures(judge: PairJudge) -> dict[str, Any]:
    """The judge alone (argmax of its three probabilities, against the question's last accepted answer)
    on the dev set, which no judge is trained on: macro-F1 3-way and correct-vs-not, and accuracy per kind."""
    from grading_lab.logreg import macro_f1

    rows, triples = dev_triples()
    pred = [JUDGE_LABELS[i] for i in judge.probabilities(triples).argmax(axis=1)]
    truth = [row["label"] for row in rows]
    two = lambda labels: ["correct" if v == "correct" else "not" for v in labels]  # noqa: E731
    kinds: dict[str, list[bool]] = {}
    for row, p in zip(rows, pred, strict=True):
        kinds.setdefault(row.get("kind", "?"), []).append(p == row["label"])
    return {"answers": len(rows), "macro_f1_3": round(macro_f1(truth, pred, list(JUDGE_LABELS)), 4),
            "macro_f1_2": round(macro_f1(two(truth), two(pred), ["correct", "not"]), 4),
            "per_kind": {k: round(float(np.mean(v)), 3) for k, v in sorted(kinds.items())}}


def _batches(pairs: list[Pair], size: int, rng: random.Random) -> list[list[Pair]]:
    """Batches of similar length (less padding), in a shuffled order."""
    order = sorted(pairs, key=lambda p: len(p.question) + len(p.reference) + len(p.answer) + rng.random() * 40)
    batches = [order[i:i + size] for i in range(0, len(order), size)]
    rng.shuffle(batches)
    return batches


def encode_pairs(tokenizer: Any, pairs: Sequence[Pair], max_length: int, with_question: bool = True) -> Any:
    """Token ids of the pairs, as the served judge makes them: the first text is cut, and an answer too
    long to fit even alone is cut too (app/grading/pairjudge.py does the same)."""
    first = [pair_text(p.question, p.reference, with_question) for p in pairs]
    second = [p.answer for p in pairs]
    try:
        return tokenizer(first, second, truncation="only_first", max_length=max_length, padding=True,
                         return_tensors="pt")
    except Exception:  # the tokenizers library raises a bare Exception when `only_first` cannot fit
        return tokenizer(first, second, truncation="longest_first", max_length=max_length, padding=True,
                         return_tensors="pt")


def fine_tune(pairs: list[Pair], recipe: Recipe, out_dir: Path, log: Any = print) -> None:
    """Fine-tune the base model on the pairs and save it (transformers format) to out_dir."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_linear_schedule_with_warmup

    torch.manual_seed(recipe.seed)
    rng = random.Random(recipe.seed)
    base = resolve_model_path(recipe.base_model)
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    model = AutoModelForSequenceClassification.from_pretrained(
        str(base), num_labels=len(JUDGE_LABELS), attn_implementation="eager")
    if recipe.layers is not None:
        encoder = model.base_model.encoder
        encoder.layer = encoder.layer[: recipe.layers]
        model.config.num_hidden_layers = recipe.layers
    counts = Counter(p.label for p in pairs)
    weights = torch.tensor([len(pairs) / (len(JUDGE_LABELS) * counts[label]) for label in JUDGE_LABELS])
    loss_fn = torch.nn.CrossEntropyLoss(weight=weights)
    soft: dict[tuple[str, str, str], np.ndarray] = {}
    if recipe.distil:
        log(f"reading the {len(pairs)} pairs with the teacher judge {recipe.teacher}")
        soft = teacher_logits(recipe, pairs)
    steps = recipe.epochs * math.ceil(len(pairs) / recipe.batch_size)
    optimiser = torch.optim.AdamW(model.parameters(), lr=recipe.learning_rate, weight_decay=0.01)
    schedule = get_linear_schedule_with_warmup(optimiser, int(recipe.warmup * steps), steps)
    model.train()
    step, started = 0, time.monotonic()
    for epoch in range(recipe.epochs):
        for batch in _batches(pairs, recipe.batch_size, rng):
            enc = encode_pairs(tokenizer, batch, recipe.max_length, recipe.question)
            labels = torch.tensor([JUDGE_LABELS.index(p.label) for p in batch])
            logits = model(**enc).logits
            loss = loss_fn(logits, labels)
            if recipe.distil:
                teacher = torch.from_numpy(np.stack([soft[(p.question, p.reference, p.answer)] for p in batch]))
                loss = (1 - recipe.distil) * loss + recipe.distil * distillation_loss(logits, teacher)
            optimiser_step(loss, model.parameters(), optimiser, schedule)
            step += 1
            if step % 100 == 0:
                log(f"epoch {epoch + 1} step {step}/{steps} loss {loss.item():.3f} "
                    f"({time.monotonic() - started:.0f} s)")
    model.eval()
    model.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))


def optimiser_step(loss: Any, parameters: Any, optimiser: Any, schedule: Any) -> None:
    """One step of training: the loss's gradients, clipped to norm 1, applied, and the schedule moved on."""
    import torch

    loss.backward()
    torch.nn.utils.clip_grad_norm_(parameters, 1.0)
    optimiser.step()
    schedule.step()
    optimiser.zero_grad()


def distillation_loss(logits: Any, teacher: Any, temperature: float = DISTIL_TEMPERATURE) -> Any:
    """KL(teacher || student) of the temperature-softened distributions, times T squared (so that its
    gradients keep their scale as T changes; Hinton et al., 2015)."""
    import torch

    student = torch.log_softmax(logits / temperature, dim=-1)
    target = torch.log_softmax(teacher / temperature, dim=-1)
    return torch.nn.functional.kl_div(student, target, log_target=True, reduction="batchmean") * temperature**2


def export(model_dir: Path, target_dir: Path) -> dict[str, Any]:
    """The fine-tuned model as int8 ONNX (same recipe as the encoder's export) beside its tokenizer."""
    import torch
    from transformers import AutoModelForSequenceClassification

    from ingest.onnx_export import optimise_and_quantise

    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir), attn_implementation="eager").eval()

    class _Logits(torch.nn.Module):  # fixes the input order for the exporter
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    token_type_ids: torch.Tensor) -> torch.Tensor:
            return self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).logits

    target_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.onnx"
        ids = torch.ones((2, 16), dtype=torch.int64)
        axes = {0: "batch", 1: "sequence"}
        with torch.no_grad():
            torch.onnx.export(_Logits().eval(), (ids, torch.ones_like(ids), torch.zeros_like(ids)), str(raw),
                              input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["logits"],
                              opset_version=17, dynamo=False,
                              dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
                                            "logits": {0: "batch"}})
        config = model.config
        scaled = optimise_and_quantise(raw, target_dir / ONNX_FILE, config.num_attention_heads, config.hidden_size,
                                       model_dir / "tokenizer.json")
    shutil.copy(model_dir / "tokenizer.json", target_dir / "tokenizer.json")
    return {"outlier_channels_scaled": scaled}


def agreement(model_dir: Path, judge: PairJudge, pairs: list[Pair]) -> dict[str, float]:
    """How often the int8 judge gives the PyTorch model's label, and the largest probability gap."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir)).eval()
    with torch.no_grad():
        ref = torch.softmax(model(**encode_pairs(tokenizer, pairs, MAX_LENGTH, judge.with_question)).logits,
                            dim=-1).numpy()
    got = judge.probabilities([(p.question, p.reference, p.answer) for p in pairs])
    return {"same_label": float(np.mean(ref.argmax(1) == got.argmax(1))), "max_gap": float(np.abs(ref - got).max())}


def train_judge(target_dir: Path = JUDGE_DIR, recipe: Recipe | None = None, log: Any = print,
                measure: bool = True) -> dict[str, Any]:
    """Rebuild the shipped judge from the repository's data; returns its manifest.

    With `measure` (and no held-out fold in the recipe), a first training leaves out ASAG fold 0
    and reports the judge on it, so that the shipped judge's manifest has a figure on questions
    that judge's recipe never trained on; the shipped judge is then trained on everything.
    """
    recipe = recipe or Recipe()
    if recipe.late_split is not None:
        from grading_lab.late_judge import train_late_judge

        return train_late_judge(target_dir, recipe, log)
    held_out = None
    if measure and recipe.holdout is None:
        with tempfile.TemporaryDirectory() as tmp:
            log("training with ASAG fold 0 held out, to measure the recipe on unseen questions")
            held_out = train_judge(Path(tmp) / "held-out", replace(recipe, holdout=0), log, measure=False)[
                "asag_heldout"]
    pairs = training_pairs(recipe)
    log(f"{len(pairs)} training pairs: {dict(Counter(p.label for p in pairs))}")
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "torch"
        fine_tune(pairs, recipe, model_dir, log)
        stage = Path(tmp) / "export"
        extra = export(model_dir, stage)
        manifest: dict[str, Any] = {
            "recipe": asdict(recipe),
            "labels": list(JUDGE_LABELS),
            "max_length": recipe.max_length,
            "data": data_hashes(recipe),
            "pairs": {"total": len(pairs), "labels": dict(Counter(p.label for p in pairs)),
                      "bank_kinds": dict(Counter(p.kind for p in pairs if not p.group.startswith(recipe.asag)))},
            "onnx_sha256": file_sha256(stage / ONNX_FILE),
            "tokenizer_sha256": file_sha256(stage / "tokenizer.json"),
            **extra,
        }
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        check = rng_sample(pairs, 256, recipe.seed)
        manifest["int8_vs_pytorch"] = agreement(model_dir, PairJudge(stage), check)
        manifest["dev_alone"] = dev_figures(PairJudge(stage))
        if recipe.holdout is not None:
            manifest["asag_heldout"] = {"fold": recipe.holdout, "of": HOLDOUT_FOLDS,
                                        **heldout_figures(PairJudge(stage), recipe)}
        elif held_out is not None:
            manifest["asag_heldout"] = {**held_out, "note": "a training of this recipe without that fold"}
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        if target_dir.exists():
            shutil.rmtree(target_dir)
        shutil.copytree(stage, target_dir)
    return manifest


def rng_sample(pairs: list[Pair], n: int, seed: int) -> list[Pair]:
    """A fixed sample of the pairs."""
    return random.Random(seed).sample(pairs, min(n, len(pairs)))
