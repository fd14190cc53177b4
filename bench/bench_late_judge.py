"""What a late-interaction judge would cost served, beside the pair judge and one int8 encode, in turns.

`python bench/bench_late_judge.py [--split 4]`: the late judge's upper layers (grading_lab/late_judge.py,
MiniLM's last `6 - split` layers over the joined states of the accepted answer with the question and of
the answer) exported to int8 ONNX as the pair judge is (fused, dynamic int8 weights and activations),
then over the dev set's pairs, one per call: the p50 of one joined pass, of one pass of the shipped pair
judge and of one lone int8 encode of the answer, measured in the same rounds. The joined pass is fed
states computed beforehand: served, the accepted answer's would be computed once per rubric and the
answer's would be one more output of the encode the grader runs anyway. The weights are the base
model's (a pass costs the same whatever they are), so no training is needed to measure it.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench_encoder import served_onnx
from common import p50_ms_each

from app.config import JUDGE_DIR
from app.grading.pairjudge import PairJudge, pair_text
from grading_lab.judge_train import dev_triples
from grading_lab.late_judge import ANSWER_MAX, FIRST_MAX, LateJudge, _load, export_joined, lower_states

ROUNDS = 5
PER_ROUND = 120


def joined_session(judge: LateJudge, config: Any, target: Path) -> Any:
    """The joined pass exported as `tutor models train-judge --late` exports it, as an onnxruntime session."""
    import onnxruntime as ort

    export_joined(judge, config, target / "joined-int8.onnx")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(target / "joined-int8.onnx"), options, providers=["CPUExecutionProvider"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", type=int, default=4)
    args = parser.parse_args()
    tokenizer, bert = _load()
    bert.eval()
    _, triples = dev_triples()
    firsts = lower_states(tokenizer, bert, [pair_text(q, r) for q, r, _ in triples], args.split, FIRST_MAX)
    answers = lower_states(tokenizer, bert, [a for _, _, a in triples], args.split, ANSWER_MAX)
    feeds = [{"first": firsts[pair_text(q, r)][None].numpy(), "answer": answers[a][None].numpy()}
             for q, r, a in triples]
    pair_judge = PairJudge(JUDGE_DIR)
    encoder, _, _ = served_onnx()
    texts = [a for _, _, a in triples]
    with tempfile.TemporaryDirectory() as tmp:
        judge = LateJudge(bert, args.split)
        judge.train(False)
        session = joined_session(judge, bert.config, Path(tmp))
        for feed in feeds[:20]:  # warm up
            session.run(None, feed)
        pair_judge.probabilities(triples[:20])
        encoder.encode_alone(texts[:20])
        encodes, joined, pairs = [], [], []
        for r in range(ROUNDS):
            chunk = slice((r * PER_ROUND) % len(triples), (r * PER_ROUND) % len(triples) + PER_ROUND)
            encodes.append(p50_ms_each(lambda a: encoder.encode_alone([a]), texts[chunk]))
            joined.append(p50_ms_each(lambda f: session.run(None, f), feeds[chunk]))
            pairs.append(p50_ms_each(lambda t: pair_judge.probabilities([t]), triples[chunk]))
    enc = statistics.median(encodes)
    print(f"one int8 encode of an answer: p50 {enc:.2f} ms")
    print(f"pair judge pass: p50 {statistics.median(pairs):.2f} ms, "
          f"{statistics.median([p / e for p, e in zip(pairs, encodes, strict=True)]):.2f} x one encode")
    print(f"late judge joined pass, joined layers {6 - args.split}: p50 {statistics.median(joined):.2f} ms, "
          f"{statistics.median([j / e for j, e in zip(joined, encodes, strict=True)]):.2f} x one encode, "
          f"{statistics.median([j / p for j, p in zip(joined, pairs, strict=True)]):.2f} x the pair judge")


if __name__ == "__main__":
    main()
