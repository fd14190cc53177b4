"""The pair judge's cost per graded answer, beside one int8 encode of the answer, measured in turns.

`python bench/bench_judge.py [JUDGE_DIR ...]` (default: the shipped models/judge/). For each judge
folder: the p50 of one judge pass as grading makes it (the question, the accepted answer it is
compared with, the learner's answer; one answer per call) over the dev set's answers, and that p50
divided by the p50 of one lone int8 encode of the same answers, measured in the same rounds. The
judge folders are measured in turns too, so their ratio to each other holds on a noisy machine.
"""

from __future__ import annotations

import statistics
import sys
from functools import partial
from pathlib import Path
from typing import TypeVar

from bench_encoder import served_onnx
from common import p50_ms_each

from app.config import JUDGE_DIR
from app.grading.pairjudge import PairJudge
from grading_lab.judge_train import dev_triples

T = TypeVar("T")
ROUNDS = 5
PER_ROUND = 120


def _judge_one(judge: PairJudge, triple: tuple[str, str, str]) -> object:
    return judge.probabilities([triple])


def main() -> None:
    """Print, per judge folder, its p50 per answer and its ratio to one encode (median of the rounds)."""
    folders = [Path(a) for a in sys.argv[1:]] or [JUDGE_DIR]
    judges = {str(f): PairJudge(f) for f in folders}
    encoder, _, _ = served_onnx()
    _, triples = dev_triples()
    answers = [t[2] for t in triples]
    for judge in judges.values():  # warm up
        judge.probabilities(triples[:20])
    encoder.encode_alone(answers[:20])
    ratios: dict[str, list[float]] = {name: [] for name in judges}
    p50s: dict[str, list[float]] = {name: [] for name in judges}
    encodes: list[float] = []
    for r in range(ROUNDS):
        chunk = slice((r * PER_ROUND) % len(triples), (r * PER_ROUND) % len(triples) + PER_ROUND)
        enc = p50_ms_each(lambda a: encoder.encode_alone([a]), answers[chunk])
        encodes.append(enc)
        for name, judge in judges.items():
            p50 = p50_ms_each(partial(_judge_one, judge), triples[chunk])
            p50s[name].append(p50)
            ratios[name].append(p50 / enc)
    print(f"one int8 encode of an answer: p50 {statistics.median(encodes):.2f} ms")
    first = next(iter(judges))
    for name, judge in judges.items():
        layers = judge.manifest["recipe"].get("layers") or 6
        line = (f"{name}: {layers} layers, judge pass p50 {statistics.median(p50s[name]):.2f} ms, "
                f"{statistics.median(ratios[name]):.2f} x one encode")
        if name != first:
            rel = [a / b for a, b in zip(p50s[name], p50s[first], strict=True)]
            line += f", {statistics.median(rel):.2f} x {first}"
        print(line)


if __name__ == "__main__":
    main()
