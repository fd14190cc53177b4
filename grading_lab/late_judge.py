"""A late-interaction judge, measured side by side with the pair judge (not served).

The pair judge (app/grading/pairjudge.py) is a second transformer pass over the accepted answer, the
question and the answer together: 60-160 tokens, about 3.4 times one encode of the answer alone.
This judge reads the two texts apart through MiniLM's first `split` layers, kept frozen, and
together only through the last ones, fine-tuned. Its lower layers are the encoder's own, so served
it would cost the answer's encode (which the grader runs anyway; the layer's states would be one
more output of the same pass), the accepted answer's states computed once per rubric, and
`6 - split` layers over the joined states.

`python -m grading_lab.late_judge --split 4` trains it with the pair judge's data and recipe
(grading_lab/judge_train.py), then prints its figures alone on the dev set (argmax of its three
probabilities, as `dev_alone` in models/judge/judge.json) and the time of one joined pass against one
encode of the answer alone and one pass of the pair judge's size over the joined text, all in PyTorch
fp32, one text per call, in the same run. The blind set is never read here.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import random
import statistics
import tempfile
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from app.grading.pairjudge import JUDGE_LABELS, pair_text
from grading_lab.judge_train import Recipe, dev_figures, dev_triples, optimiser_step, training_pairs
from ingest.embedder import resolve_model_path

FIRST_MAX = 128  # tokens of the accepted answer and question, read alone
ANSWER_MAX = 96  # tokens of the answer, read alone


def _load() -> tuple[Any, Any]:
    from transformers import AutoModel, AutoTokenizer

    base = resolve_model_path(Recipe.base_model)
    return AutoTokenizer.from_pretrained(str(base)), AutoModel.from_pretrained(str(base), attn_implementation="eager")


def _mask(lengths: list[int], total: int) -> Any:
    import torch

    keep = torch.arange(total)[None, :] < torch.tensor(lengths)[:, None]
    return (~keep).float()[:, None, None, :] * torch.finfo(torch.float32).min


def _run(layers: Any, hidden: Any, mask: Any) -> Any:
    for layer in layers:
        out = layer(hidden, attention_mask=mask)
        hidden = out[0] if isinstance(out, tuple) else out
    return hidden


def lower_states(tokenizer: Any, bert: Any, texts: list[str], split: int, max_length: int,
                 known: dict[str, Any] | None = None) -> dict[str, Any]:
    """Each distinct text's token states after the first `split` layers, read alone. With `known`
    (states read before with the same split and length), only the texts it lacks are read, and it
    gains them."""
    import torch

    out: dict[str, Any] = {} if known is None else known
    distinct = sorted(set(texts) - out.keys(), key=len)
    with torch.no_grad():
        for i in range(0, len(distinct), 64):
            chunk = distinct[i:i + 64]
            enc = tokenizer(chunk, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
            hidden = bert.embeddings(input_ids=enc["input_ids"], token_type_ids=enc["token_type_ids"])
            lengths = enc["attention_mask"].sum(1).tolist()
            hidden = _run(bert.encoder.layer[:split], hidden, _mask(lengths, hidden.shape[1]))
            for text, h, n in zip(chunk, hidden, lengths, strict=True):
                out[text] = h[:n].clone()
    return out


class LateJudge:
    """The upper layers over the joined states, a segment vector marking the answer's, and a classifier."""

    def __init__(self, bert: Any, split: int) -> None:
        import torch

        self.layers = torch.nn.ModuleList(copy.deepcopy(bert.encoder.layer[split:]))
        hidden = bert.config.hidden_size
        self.segment = torch.nn.Parameter(torch.zeros(hidden))
        self.pool = torch.nn.Linear(hidden, hidden)
        self.head = torch.nn.Linear(hidden, len(JUDGE_LABELS))
        self.modules = torch.nn.ModuleList([self.layers, self.pool, self.head])
        self.dropout = torch.nn.Dropout(0.1)

    def parameters(self) -> list[Any]:
        return [*self.modules.parameters(), self.segment]

    def train(self, on: bool) -> None:
        self.modules.train(on)
        self.dropout.train(on)

    def logits(self, firsts: list[Any], answers: list[Any]) -> Any:
        import torch

        joined = [torch.cat([f, a + self.segment]) for f, a in zip(firsts, answers, strict=True)]
        lengths = [len(j) for j in joined]
        total = max(lengths)
        hidden = torch.stack([torch.nn.functional.pad(j, (0, 0, 0, total - len(j))) for j in joined])
        return self.read(hidden, _mask(lengths, total))

    def read(self, hidden: Any, mask: Any) -> Any:
        """The logits of joined states (batch x tokens x dim; `mask` additive, or None for one pair)."""
        import torch

        hidden = _run(self.layers, hidden, mask)
        pooled = torch.tanh(self.pool(hidden[:, 0]))
        return self.head(self.dropout(pooled))

    def exportable(self) -> Any:
        """One unpadded pair's pass as a module for the ONNX exporter: (first, answer) states -> logits."""
        import torch

        judge = self

        class _Joined(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                # Registered, so that the exporter sees the weights and `eval` reaches the dropout.
                self.parts = torch.nn.ModuleList([judge.modules, judge.dropout])
                self.segment = judge.segment

            def forward(self, first: torch.Tensor, answer: torch.Tensor) -> torch.Tensor:
                return judge.read(torch.cat([first, answer + self.segment], dim=1), None)

        return _Joined().eval()


class ServedStates:
    """The serving int8 encoder's states after the first `split` layers (what the served late judge reads),
    each text read once: the accepted answers with their question cut to FIRST_MAX tokens and rounded
    to float16, as the served judge keeps them (app/grading/latejudge.py), the answers as the encoder cuts them."""

    def __init__(self, split: int) -> None:
        from app.config import Settings
        from ingest.embedder import model_id_for
        from ingest.onnx_encoder import OnnxEncoder, encoder_dir

        settings = Settings()
        self.model_id = model_id_for(settings.model)
        self.folder = encoder_dir(settings.index_path, self.model_id)
        self.encoder = OnnxEncoder(self.folder, self.model_id, threads=2, states_layer=split - 1)

    def read(self, texts: list[str], first: bool, known: dict[str, Any]) -> dict[str, Any]:
        import torch

        todo = [t for t in dict.fromkeys(texts) if t not in known]
        states = self.encoder.layer_states(todo, FIRST_MAX if first else None)
        for text, st in zip(todo, states, strict=True):
            known[text] = torch.from_numpy(st.astype(np.float16).astype(np.float32) if first else st)
        return known


def train(split: int, epochs: int, learning_rate: float, seed: int = Recipe.seed, crossfit: int | None = None,
          log: Any = print, loaded: tuple[Any, Any] | None = None,
          known: tuple[dict[str, Any], dict[str, Any]] | None = None, recipe: Recipe | None = None,
          served: ServedStates | None = None) -> tuple[LateJudge, Any, Any]:
    """The upper layers and head fitted on the pair judge's training pairs (less one cross-fitting fold
    of the decision's written answers when `crossfit` is set), the lower states read once (`known`: the
    first texts' and the answers' states from an earlier call with the same split, kept across calls):
    PyTorch's fp32 states, or with `served` the serving int8 encoder's. `recipe`: the training data's
    (by default the pair judge's)."""
    import torch

    torch.manual_seed(seed)
    rng = random.Random(seed)
    recipe = recipe or Recipe(crossfit=crossfit)
    pairs = training_pairs(recipe)
    tokenizer, bert = loaded or _load()
    bert.eval()
    started = time.monotonic()
    firsts, answers = known or ({}, {})
    first_texts = [pair_text(p.question, p.reference) for p in pairs]
    if served is None:
        lower_states(tokenizer, bert, first_texts, split, FIRST_MAX, firsts)
        lower_states(tokenizer, bert, [p.answer for p in pairs], split, ANSWER_MAX, answers)
    else:
        served.read(first_texts, True, firsts)
        served.read([p.answer for p in pairs], False, answers)
    log(f"{len(pairs)} pairs; lower states of {len(firsts) + len(answers)} texts "
        f"in {time.monotonic() - started:.0f} s")
    judge = LateJudge(bert, split)
    counts = Counter(p.label for p in pairs)
    weights = torch.tensor([len(pairs) / (len(JUDGE_LABELS) * counts[label]) for label in JUDGE_LABELS])
    loss_fn = torch.nn.CrossEntropyLoss(weight=weights)
    size = recipe.batch_size
    steps = epochs * math.ceil(len(pairs) / size)
    optimiser = torch.optim.AdamW(judge.parameters(), lr=learning_rate, weight_decay=0.01)
    from transformers import get_linear_schedule_with_warmup

    schedule = get_linear_schedule_with_warmup(optimiser, int(recipe.warmup * steps), steps)
    judge.train(True)
    step = 0
    for epoch in range(epochs):
        order = list(range(len(pairs)))
        rng.shuffle(order)
        for i in range(0, len(order), size):
            batch = [pairs[j] for j in order[i:i + size]]
            logits = judge.logits([firsts[pair_text(p.question, p.reference)] for p in batch],
                                  [answers[p.answer] for p in batch])
            loss = loss_fn(logits, torch.tensor([JUDGE_LABELS.index(p.label) for p in batch]))
            optimiser_step(loss, judge.parameters(), optimiser, schedule)
            step += 1
            if step % 200 == 0:
                log(f"epoch {epoch + 1} step {step}/{steps} loss {loss.item():.3f} "
                    f"({time.monotonic() - started:.0f} s)")
    judge.train(False)
    return judge, tokenizer, bert


def export_joined(judge: LateJudge, config: Any, target: Path) -> None:
    """The joined pass as int8 ONNX, as the pair judge is exported (fused, dynamic int8 weights and
    activations): inputs `first` and `answer` (1 x tokens x dim states), output `logits` (1 x 3)."""
    import onnx
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    with tempfile.TemporaryDirectory() as tmp:
        raw, fused = Path(tmp) / "raw.onnx", Path(tmp) / "fused.onnx"
        hidden = config.hidden_size
        with torch.no_grad():
            torch.onnx.export(judge.exportable(), (torch.zeros(1, 12, hidden), torch.zeros(1, 6, hidden)), str(raw),
                              input_names=["first", "answer"], output_names=["logits"], opset_version=17,
                              dynamo=False, dynamic_axes={"first": {1: "first_len"}, "answer": {1: "answer_len"}})
        optimize_model(str(raw), model_type="bert", num_heads=config.num_attention_heads,
                       hidden_size=hidden).save_model_to_file(str(fused))
        quantize_dynamic(str(fused), str(target), per_channel=True, reduce_range=True, weight_type=QuantType.QInt8,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})


def train_late_judge(target_dir: Path, recipe: Recipe, log: Any = print) -> dict[str, Any]:
    """A late judge trained by `recipe` (its `late_split` frozen layers) on the serving int8 encoder's
    states, exported to `target_dir` with its manifest; returns the manifest."""
    import shutil

    import torch

    from app.grading.latejudge import KIND
    from app.grading.latejudge import LateJudge as ServedJudge
    from app.grading.pairjudge import MANIFEST, ONNX_FILE
    from grading_lab.judge_train import data_hashes, rng_sample
    from ingest.identity import file_sha256
    from ingest.onnx_encoder import ONNX_FILE as ENCODER_FILE

    split = int(recipe.late_split or 0)
    served = ServedStates(split)
    known: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
    judge, _, bert = train(split, recipe.epochs, recipe.learning_rate, recipe.seed, log=log, known=known,
                           recipe=recipe, served=served)
    pairs = training_pairs(recipe)
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp) / "export"
        stage.mkdir()
        export_joined(judge, bert.config, stage / ONNX_FILE)
        manifest: dict[str, Any] = {
            "kind": KIND,
            "recipe": asdict(recipe),
            "labels": list(JUDGE_LABELS),
            "states_layer": split - 1,
            "first_max": FIRST_MAX,
            "encoder": {"model_id": served.model_id, "onnx_sha256": file_sha256(served.folder / ENCODER_FILE)},
            "data": data_hashes(recipe),
            "pairs": {"total": len(pairs), "labels": dict(Counter(p.label for p in pairs))},
            "onnx_sha256": file_sha256(stage / ONNX_FILE),
        }
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        int8 = ServedJudge(stage, served.encoder)
        check = rng_sample(pairs, 256, recipe.seed)
        firsts, answers = known
        with torch.no_grad():
            ref = np.stack([torch.softmax(judge.logits([firsts[pair_text(p.question, p.reference)]],
                                                       [answers[p.answer]])[0], -1).numpy() for p in check])
        got = int8.probabilities([(p.question, p.reference, p.answer) for p in check])
        manifest["int8_vs_pytorch"] = {"same_label": float(np.mean(ref.argmax(1) == got.argmax(1))),
                                       "max_gap": float(np.abs(ref - got).max())}
        manifest["dev_alone"] = dev_figures(int8)  # type: ignore[arg-type]
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        if target_dir.exists():
            shutil.rmtree(target_dir)
        shutil.copytree(stage, target_dir)
    return manifest


class ReadingJudge:
    """A trained late judge behind the pair judge's interface (`probabilities`), read in PyTorch fp32,
    so that the whole grader can be measured with it (`whole_grader`)."""

    def __init__(self, judge: LateJudge, tokenizer: Any, bert: Any, split: int) -> None:
        self.judge, self.tokenizer, self.bert, self.split = judge, tokenizer, bert, split
        self._firsts: dict[str, Any] = {}  # an accepted answer's states, read once for all its answers
        self._answers: dict[str, Any] = {}

    def probabilities(self, triples: list[tuple[str, str, str]]) -> np.ndarray:
        import torch

        firsts = lower_states(self.tokenizer, self.bert, [pair_text(q, r) for q, r, _ in triples], self.split,
                              FIRST_MAX, self._firsts)
        answers = lower_states(self.tokenizer, self.bert, [a for _, _, a in triples], self.split, ANSWER_MAX,
                               self._answers)
        with torch.no_grad():
            rows = [torch.softmax(self.judge.logits([firsts[pair_text(q, r)]], [answers[a]])[0], -1).numpy()
                    for q, r, a in triples]
        return np.stack(rows).astype(np.float32) if rows else np.zeros((0, len(JUDGE_LABELS)), np.float32)


def whole_grader(split: int, epochs: int, learning_rate: float, log: Any = print) -> dict[str, Any]:
    """The learned decision's grouped CV (grading_lab/decision_fit.py: the dev set and the decision's
    written answers) with late judges in the pair judge's place: one trained like the shipped judge
    reads the dev set, and two cross-fitted ones each read the fold of questions they were trained
    without, as `tutor models train-judge --crossfit` does for the pair judge."""
    from functools import partial

    from app.grading.grader import Graders
    from grading_lab.decision_fit import DEFAULT_FILES, _in_fold, bank_rubrics, concat, crossval, dataset
    from grading_lab.judge_train import CROSSFIT_FOLDS, DECISION_ANSWERS
    from ingest.embedder import SentenceTransformerEncoder

    loaded = _load()
    known: tuple[dict[str, Any], dict[str, Any]] = ({}, {})  # the three judges' lower states, read once
    judges = {k: ReadingJudge(train(split, epochs, learning_rate, crossfit=k, log=log, loaded=loaded,
                                    known=known)[0], *loaded, split)
              for k in (None, *range(CROSSFIT_FOLDS))}
    log(json.dumps({"dev_alone": dev_alone(judges[None].judge, *loaded, split)}))
    encoder = SentenceTransformerEncoder()
    rubrics = bank_rubrics(encoder)
    trained_on = {p.name for p in DECISION_ANSWERS}
    parts = []
    for path in DEFAULT_FILES:
        if path.name not in trained_on:
            parts.append(dataset(path, encoder, Graders(judge=judges[None]), rubrics=rubrics))  # type: ignore[arg-type]
            continue
        for k in range(CROSSFIT_FOLDS):
            parts.append(dataset(path, encoder, Graders(judge=judges[k]),  # type: ignore[arg-type]
                                 keep=partial(_in_fold, k), rubrics=rubrics))
    return crossval(concat(parts))


def dev_alone(judge: LateJudge, tokenizer: Any, bert: Any, split: int) -> dict[str, Any]:
    """As judge_train.dev_figures reads the pair judge: argmax on the dev set, each answer alone."""
    return dev_figures(ReadingJudge(judge, tokenizer, bert, split))  # type: ignore[arg-type]


LAYER_OUTPUT = "/inner/encoder/layer.{}/output/LayerNorm/LayerNormalization_output_0"  # the int8 export's names


def int8_states(texts: list[str], tokenizer: Any, split: int, max_length: int) -> dict[str, Any]:
    """Each text's states after the first `split` layers as the served int8 encoder computes them (one
    text per run, the layer's output added to the export's outputs): what a served late judge would read."""
    import onnx
    import onnxruntime as ort
    import torch

    from app.config import DATA_DIR

    path = next((DATA_DIR / "index" / "encoders").glob("*/model-int8.onnx"))
    model = onnx.load(str(path))
    model.graph.output.append(onnx.ValueInfoProto(name=LAYER_OUTPUT.format(split - 1)))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    out = {}
    for text in dict.fromkeys(texts):
        enc = tokenizer([text], truncation=True, max_length=max_length, return_tensors="np")
        feeds = {k: v.astype(np.int64) for k, v in enc.items() if k in names}
        out[text] = torch.from_numpy(session.run([LAYER_OUTPUT.format(split - 1)], feeds)[0][0])
    return out


def int8_agreement(judge: LateJudge, tokenizer: Any, bert: Any, split: int) -> dict[str, float]:
    """How often the judge gives the same label on the dev set fed the int8 encoder's states as fed
    PyTorch's (which it was trained on), the largest gap in a probability, and the states' mean cosine."""
    import torch

    _, triples = dev_triples()
    firsts = [pair_text(q, r) for q, r, _ in triples]
    answers = [a for _, _, a in triples]
    exact = {**lower_states(tokenizer, bert, firsts, split, FIRST_MAX),
             **lower_states(tokenizer, bert, answers, split, ANSWER_MAX)}
    served = {**int8_states(firsts, tokenizer, split, FIRST_MAX), **int8_states(answers, tokenizer, split, ANSWER_MAX)}
    cosines = [float(torch.nn.functional.cosine_similarity(exact[t], served[t], dim=-1).mean()) for t in exact]
    same, gap = [], 0.0
    with torch.no_grad():
        for first, answer in zip(firsts, answers, strict=True):
            a = torch.softmax(judge.logits([exact[first]], [exact[answer]])[0], -1)
            b = torch.softmax(judge.logits([served[first]], [served[answer]])[0], -1)
            same.append(bool(a.argmax() == b.argmax()))
            gap = max(gap, float((a - b).abs().max()))
    return {"same_label": round(float(np.mean(same)), 4), "max_gap": round(gap, 4),
            "states_cosine": round(float(np.mean(cosines)), 4)}


def timing(judge: LateJudge, tokenizer: Any, bert: Any, split: int, rounds: int = 3) -> dict[str, float]:
    """Median ms of one joined pass (the upper layers over a dev pair's states) and of one full encode of
    the answer alone, in turns, one text per call, one thread."""
    import torch

    torch.set_num_threads(1)
    _, triples = dev_triples()
    sample = triples[::4]
    firsts = lower_states(tokenizer, bert, [pair_text(q, r) for q, r, _ in sample], split, FIRST_MAX)
    answers = lower_states(tokenizer, bert, [a for _, _, a in sample], split, ANSWER_MAX)
    joined, encode, pair = [], [], []
    alone = [tokenizer([a], truncation=True, max_length=ANSWER_MAX, return_tensors="pt") for _, _, a in sample]
    both = [tokenizer([pair_text(q, r)], [a], truncation="longest_first", max_length=160, return_tensors="pt")
            for q, r, a in sample]
    with torch.no_grad():
        for _ in range(rounds):
            for (q, r, a), one, two in zip(sample, alone, both, strict=True):
                t = time.perf_counter()
                judge.logits([firsts[pair_text(q, r)]], [answers[a]])
                joined.append(time.perf_counter() - t)
                t = time.perf_counter()
                bert(**one)
                encode.append(time.perf_counter() - t)
                t = time.perf_counter()
                bert(**two)
                pair.append(time.perf_counter() - t)
    j, e, f = (statistics.median(v) * 1e3 for v in (joined, encode, pair))
    return {"joined_ms": round(j, 3), "encode_ms": round(e, 3), "pair_pass_ms": round(f, 3),
            "joined_over_encode": round(j / e, 3), "pair_pass_over_encode": round(f / e, 3)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", type=int, default=4, help="frozen lower layers (of 6)")
    parser.add_argument("--epochs", type=int, default=Recipe.epochs)
    parser.add_argument("--lr", type=float, default=Recipe.learning_rate)
    parser.add_argument("--whole", action="store_true",
                        help="the whole grader's grouped CV with late judges (three trained, cross-fitted)")
    args = parser.parse_args(argv)
    if args.whole:
        print(json.dumps({"split": args.split, "epochs": args.epochs, "lr": args.lr,
                          "grouped_cv": whole_grader(args.split, args.epochs, args.lr)}, indent=1))
        return
    judge, tokenizer, bert = train(args.split, args.epochs, args.lr)
    print(json.dumps({"split": args.split, "epochs": args.epochs, "lr": args.lr,
                      "dev_alone": dev_alone(judge, tokenizer, bert, args.split),
                      "int8_states": int8_agreement(judge, tokenizer, bert, args.split),
                      "timing": timing(judge, tokenizer, bert, args.split)}, indent=1))


if __name__ == "__main__":
    main()
