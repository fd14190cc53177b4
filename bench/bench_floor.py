"""The API beside its floor: the same encoder behind the same HTTP server doing nothing else (`floor_app.py`).

The API's ratio targets compare it with the bare encoder. Between the two sit two costs: what
any Python service on uvicorn pays around this encoder on this machine (HTTP, the event loop, the
hand-overs to the encoder's threads and back), and the product's own work (key, validation,
grading, storage). The floor app pays only the first, so the API's figures over the floor's say
how much of each target the product's work takes, and the floor's over the encoder's say what is
left for it. Each figure is measured between two runs of the encoder, as in `bench_api.paired`,
and the two servers take turns.
"""

from __future__ import annotations

import argparse
import statistics
from functools import partial
from pathlib import Path
from typing import TypedDict

from bench_api import Pair, bank_question, cpu_split, grading_key, p50_one_client, paired, throughput
from bench_encoder import EncoderProbe, mix_rates, served_onnx
from common import bench_env, prepared_data, served

FLOOR = Path(__file__).resolve().parent / "floor_app.py"
SERVE = ("-m", "app.cli.launch", "serve")
# name: (command, environment added); the API must not come first in the first turn's reversed order
SERVERS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {"floor": ((str(FLOOR),), {}), "api": (SERVE, {})}
# `--commit`: the API as well with each call committed before it answers (no attempt journal)
COMMIT = {"commit": (SERVE, {"TUTOR_JOURNAL": "false"})}


class ServerFigures(TypedDict):
    """One server's figures over the rounds: each pair, and the CPU per answer at 32 clients."""

    p50: list[Pair]
    rate_32: list[Pair]
    loop_ms: list[float]
    other_threads_ms: list[float]


def floor_figures(probe: EncoderProbe | None = None, rounds: int = 3,
                  servers: dict[str, tuple[tuple[str, ...], dict[str, str]]] = SERVERS) -> dict[str, ServerFigures]:
    """Per server ("floor", "api", ...): one-client p50 and 32-client rate, each between two runs of the
    encoder as served (`probe`: the API bench's, or one at the best batch size of 8-64 measured here)."""
    out: dict[str, ServerFigures] = {name: {"p50": [], "rate_32": [], "loop_ms": [], "other_threads_ms": []}
                                     for name in servers}
    if probe is None:
        encoder, workers, _ = served_onnx()
        probe = EncoderProbe(mix_rates(encoder, (8, 16, 32, 64), concurrency=workers))
    with prepared_data() as data:
        env = bench_env(data)
        key, qid = grading_key(env), ""
        for turn in range(rounds):
            order = list(servers) if turn % 2 else list(reversed(servers))  # an API first: it names the question
            for name in order:
                command, extra = servers[name]
                with served({**env, **extra}, command) as (base, proc, _):
                    qid = qid or bank_question(base)
                    _measure(out[name], base, proc.pid, key, qid, probe)
    return out


def _measure(figures: ServerFigures, base: str, pid: int, key: str, qid: str, probe: EncoderProbe) -> None:
    """One server's turn: warm it, then its p50 and its 32-client rate (with the CPU split), each paired."""
    throughput(base, key, qid, 32, 3.0)
    figures["p50"] += paired(partial(p50_one_client, base, key, qid), probe.lone_p50_ms, rounds=1)

    def rate_32() -> float:
        load, split = cpu_split(pid, partial(throughput, base, key, qid, 32))
        figures["loop_ms"].append(split["loop_ms"])
        figures["other_threads_ms"].append(split["other_threads_ms"])
        return load[0]

    figures["rate_32"] += paired(rate_32, probe.rate, rounds=1)


def print_floor(figures: dict[str, ServerFigures]) -> None:
    """The servers side by side: medians, ratios to the encoder, and what the product's work costs."""
    def med(values: list[float]) -> float:
        return statistics.median(values)

    floor, api = figures["floor"], figures["api"]
    print("server  one client: p50 ms, / lone encode   32 clients: answers/s, / encoder   CPU per answer at 32")
    for name, f in figures.items():
        p50, r32 = f["p50"], f["rate_32"]
        print(f"{name:6s}  {med([p['api'] for p in p50]):8.2f}  {med([p['ratio'] for p in p50]):5.2f}"
              f"                {med([p['api'] for p in r32]):8.1f}  {med([p['ratio'] for p in r32]):5.2f}"
              f"           loop {med(f['loop_ms']):.2f} + other threads {med(f['other_threads_ms']):.2f} ms")
    lone = med([(p["encoder_before"] + p["encoder_after"]) / 2 for p in api["p50"] + floor["p50"]])
    floor_p50 = med([p["api"] for p in floor["p50"]])
    extra_floor = floor_p50 - lone
    extra_api = med([p["api"] for p in api["p50"]]) - floor_p50
    print(f"  one client: the lone encode {lone:.2f} ms; the floor adds {extra_floor:.2f} ms (HTTP, loop, hand-overs), "
          f"the API {extra_api:.2f} ms more (key, validation, grading, storage);")
    print(f"  p50 <= 1.5 x the lone encode leaves {0.5 * lone:.2f} ms for both")
    if "commit" in figures:
        extra_commit = med([p["api"] for p in figures["commit"]["p50"]]) - floor_p50 - extra_api
        print(f"  committing each call before answering instead of journaling it: {extra_commit:+.2f} ms at one client")
    print("  each pair (figure between encoder runs: ratio):")
    for name, f in figures.items():
        print(f"    {name:6s} p50 " + ", ".join(f"{p['api']:.2f} ({p['ratio']:.2f})" for p in f["p50"])
              + "; at 32 " + ", ".join(f"{p['api']:.0f} ({p['ratio']:.2f})" for p in f["rate_32"]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3, help="turns of each server (default 3)")
    parser.add_argument("--commit", action="store_true",
                        help="also the API committing each call before it answers (TUTOR_JOURNAL=false)")
    args = parser.parse_args()
    print_floor(floor_figures(rounds=args.rounds, servers={**SERVERS, **COMMIT} if args.commit else SERVERS))
