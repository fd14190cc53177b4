"""Raw encoder latency and batched throughput per backend (PyTorch fp32, ONNX int8)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from common import ROOT, dev_answers, percentiles, time_calls

if TYPE_CHECKING:
    from ingest.onnx_encoder import OnnxEncoder

ANSWER = "Each GPU holds a slice of every weight matrix, so one layer's matmul runs across GPUs."


def encoder_figures() -> dict[str, dict[str, float]]:
    """Per backend: p50/p99 of one ~20-token answer, sentences/s in batches of 32, dev answers by batch size.

    The int8 encoder is measured as the API serves it (`workers` batches at once, each on
    `threads` onnxruntime threads; settings.encoder_parallelism) and as one run on every core;
    its best rates are the best of both.
    """
    from ingest.embedder import SentenceTransformerEncoder
    from ingest.onnx_encoder import OnnxEncoder

    cores = os.cpu_count() or 1
    out = {"torch-fp32": _figures(SentenceTransformerEncoder(), 1)}
    served_encoder, workers, threads = served_onnx()
    served = _figures(served_encoder, workers)
    whole = _figures(OnnxEncoder(*_export(), threads=cores), 1)
    out["onnx-int8"] = {**served, "workers": workers, "threads": threads, "solo_threads": served_encoder.solo_threads,
                        **{f"one_run_{k}": v for k, v in whole.items()}}
    rates = [(size, rate) for f in (served, whole) for size, rate in per_batch(f).items()]
    out["onnx-int8"]["best_batched_per_s"] = max(rate for size, rate in rates if size > 1)
    out["onnx-int8"]["best_any_per_s"] = max(rate for _, rate in rates)
    out["onnx-int8"]["fastest_p50_ms"] = min(served["p50_ms"], whole["p50_ms"])
    # As one client's requests reach the encoder: a few milliseconds apart, not back to back
    # (caches and clocks cool between them). Context for the API's one-client p50.
    paced = time_calls(lambda: served_encoder.encode_alone([ANSWER]), 300, pause_s=0.002)
    out["onnx-int8"]["paced_p50_ms"] = percentiles(paced)[0]
    return out


def _export() -> tuple[Path, str]:
    """The project's int8 export of the default model (`make ingest` writes it), and the model's id."""
    from ingest.embedder import model_id_for
    from ingest.onnx_encoder import encoder_dir

    model_id = model_id_for("all-MiniLM-L6-v2")
    return encoder_dir(ROOT / "data" / "index", model_id), model_id


def served_onnx() -> tuple[OnnxEncoder, int, int]:
    """The int8 encoder as the API serves it, with its workers and threads per worker."""
    from app.config import Settings
    from ingest.onnx_encoder import OnnxEncoder

    settings = Settings()
    workers, threads = settings.encoder_parallelism
    return OnnxEncoder(*_export(), threads=threads, solo_threads=settings.encoder_solo), workers, threads


def _figures(enc: object, concurrency: int) -> dict[str, float]:
    """One answer's p50/p99 as a lone request is encoded (`encode_alone` where there is one), and rates."""
    encode = enc.encode  # type: ignore[attr-defined]
    lone = getattr(enc, "encode_alone", encode)
    p50, p99 = percentiles(time_calls(lambda: lone([ANSWER]), 300))
    batch = [f"{ANSWER} ({i})" for i in range(32)]
    encode(batch)
    per_share = max(1, 20 // concurrency)
    start = time.perf_counter()
    _run([[batch] * per_share] * concurrency, encode)
    rate = per_share * concurrency * len(batch) / (time.perf_counter() - start)
    return {"p50_ms": p50, "p99_ms": p99, "batch32_per_s": rate, **mix_rates(enc, concurrency=concurrency)}


def _run(shares: list[list[list[str]]], encode: Callable[[list[str]], object]) -> None:
    """Encode each share's batches, the shares at once (one thread each)."""
    def work(batches: list[list[str]]) -> None:
        for b in batches:
            encode(b)

    if len(shares) == 1:
        work(shares[0])
        return
    threads = [threading.Thread(target=work, args=(share,)) for share in shares]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def mix_rates(enc: object, sizes: tuple[int, ...] = (1, 8, 16, 32, 64), concurrency: int = 1) -> dict[str, float]:
    """Answers/s on the development set's answers (the API benchmark's mix) per batch size, and the best.

    With concurrency > 1 that many batches are encoded at once, as the API's encoder workers do.
    """
    rates = {f"mix_batch{size}_per_s": mix_rate(enc, size, concurrency) for size in sizes}
    return {**rates, "mix_best_per_s": max(rates.values())}


def per_batch(figures: dict[str, float], prefix: str = "mix_batch") -> dict[int, float]:
    """The dev-answer rates in `figures` (as `mix_rates` names them, after `prefix`) by batch size."""
    return {int(k[len(prefix) : -len("_per_s")]): v for k, v in figures.items()
            if k.startswith(prefix) and k.endswith("_per_s")}


def mix_rate(enc: object, size: int, concurrency: int = 1, passes: int = 1) -> float:
    """Answers/s on the development set's answers in batches of `size`, `concurrency` batches at once."""
    answers = dev_answers() * passes
    encode = enc.encode  # type: ignore[attr-defined]
    batches = [answers[i : i + size] for i in range(0, len(answers), size)]
    encode(batches[0])
    start = time.perf_counter()
    _run([batches[k::concurrency] for k in range(concurrency)], encode)
    return len(answers) / (time.perf_counter() - start)


class EncoderProbe:
    """The int8 encoder as served, measured again between the API's loads: the two sides of a target
    ratio taken back to back, since this machine's speed moves 10-20 % within minutes."""

    def __init__(self, figures: dict[str, float]) -> None:
        """`figures`: the served encoder's (`encoder_figures()["onnx-int8"]`), for its best batch size (8-64)."""
        self.encoder, self.workers, _ = served_onnx()
        sizes = {size: rate for size, rate in per_batch(figures).items() if size > 1}
        self.size = max(sizes, key=sizes.__getitem__)

    def rate(self) -> float:
        """Dev answers/s at the best batch size, as many batches at once as the API's workers (about 2 s)."""
        return mix_rate(self.encoder, self.size, self.workers, passes=2)

    def lone_p50_ms(self) -> float:
        """p50 of one answer encoded as a lone request's is (`encode_alone`), back to back (about 1 s)."""
        return percentiles(time_calls(lambda: self.encoder.encode_alone([ANSWER]), 200))[0]


if __name__ == "__main__":
    for backend, figures in encoder_figures().items():
        print(f"{backend:11s} one answer p50 {figures['p50_ms']:.2f} ms, p99 {figures['p99_ms']:.2f} ms; "
              f"batches of 32: {figures['batch32_per_s']:.0f} sentences/s; dev-set answers, best batch: "
              f"{figures['mix_best_per_s']:.0f}/s")
