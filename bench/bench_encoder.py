"""Raw encoder latency and batched throughput per backend (PyTorch fp32, ONNX int8)."""

from __future__ import annotations

import time

from common import ROOT, dev_answers, percentiles, time_calls

ANSWER = "Each GPU holds a slice of every weight matrix, so one layer's matmul runs across GPUs."


def encoder_figures() -> dict[str, dict[str, float]]:
    """p50/p99 of one ~20-token answer and sentences/s in batches of 32, per backend."""
    from ingest.embedder import SentenceTransformerEncoder, model_id_for
    from ingest.onnx_encoder import OnnxEncoder, encoder_dir

    torch_enc = SentenceTransformerEncoder()
    model_id = model_id_for("all-MiniLM-L6-v2")
    onnx_enc = OnnxEncoder(encoder_dir(ROOT / "data" / "index", model_id), model_id)
    out = {}
    for name, enc in (("torch-fp32", torch_enc), ("onnx-int8", onnx_enc)):
        p50, p99 = percentiles(time_calls(lambda e=enc: e.encode([ANSWER]), 300))
        batch = [f"{ANSWER} ({i})" for i in range(32)]
        enc.encode(batch)
        start = time.perf_counter()
        for _ in range(20):
            enc.encode(batch)
        rate = 20 * 32 / (time.perf_counter() - start)
        out[name] = {"p50_ms": p50, "p99_ms": p99, "batch32_per_s": rate, **mix_rates(enc)}
    return out


def mix_rates(enc: object, sizes: tuple[int, ...] = (1, 8, 16, 32, 64)) -> dict[str, float]:
    """Answers/s on the development set's answers (the API benchmark's mix) per batch size, and the best."""
    answers = dev_answers()
    rates = {}
    for size in sizes:
        batches = [answers[i : i + size] for i in range(0, len(answers), size)]
        enc.encode(batches[0])  # type: ignore[attr-defined]
        start = time.perf_counter()
        for batch in batches:
            enc.encode(batch)  # type: ignore[attr-defined]
        rates[f"mix_batch{size}_per_s"] = len(answers) / (time.perf_counter() - start)
    return {**rates, "mix_best_per_s": max(rates.values())}


if __name__ == "__main__":
    for backend, figures in encoder_figures().items():
        print(f"{backend:11s} one answer p50 {figures['p50_ms']:.2f} ms, p99 {figures['p99_ms']:.2f} ms; "
              f"batches of 32: {figures['batch32_per_s']:.0f} sentences/s; dev-set answers, best batch: "
              f"{figures['mix_best_per_s']:.0f}/s")
