"""Every benchmark in one run, printed side by side with the targets as ratios (`make bench`)."""

from __future__ import annotations

import os
import platform

from bench_api import api_figures
from bench_encoder import encoder_figures
from bench_search import search_figures


def main() -> None:
    """Run the benchmarks and print the figures and ratios."""
    print(f"# GPU Tutor benchmarks: {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    enc = encoder_figures()
    print("\n## Encoder (one ~20-token answer; batches of 32)")
    for name, f in enc.items():
        print(f"{name:11s} p50 {f['p50_ms']:7.2f} ms  p99 {f['p99_ms']:7.2f} ms  batched {f['batch32_per_s']:6.0f}/s")
    api = api_figures()
    print(f"\n## API (backend {api['backend']})")
    print(f"ready after start: {api['ready_s']:.2f} s (target <= 2 s); resident memory {api['rss_mb']:.0f} MB (<= 300)")
    print(f"POST /v1/grade p50 {api['grade_p50_ms']:.2f} ms, p99 {api['grade_p99_ms']:.2f} ms")
    onnx_p50 = enc["onnx-int8"]["p50_ms"]
    print(f"  ratio to raw int8 encode p50: {api['grade_p50_ms'] / onnx_p50:.2f} (target <= 1.5, and <= 10 ms)")
    print("clients  batched/s (503s, errors)  unbatched/s (503s, errors)")
    batched, unbatched = api["batched"], api["unbatched"]
    for c in batched:  # type: ignore[union-attr]
        b, u = batched[c], unbatched[c]  # type: ignore[index]
        print(f"{c:>7}  {b[0]:8.1f} ({b[1]}, {b[2]})          {u[0]:8.1f} ({u[1]}, {u[2]})")
    best = enc["onnx-int8"]["batch32_per_s"]
    at32 = batched[32][0]  # type: ignore[index]
    torch_single = 1000 / enc["torch-fp32"]["p50_ms"]
    print(f"  32 clients vs int8 best batched rate: {at32 / best:.2f} (target >= 0.8); "
          f"vs PyTorch per-request {torch_single:.0f}/s: {at32 / torch_single:.1f}x (target >= 6)")
    print(f"\n## Ingestion: {api['ingest_embedded']} texts in {api['ingest_s']:.1f} s = "
          f"{api['ingest_texts_per_s']:.0f} texts/s (first run, PyTorch, including model load)")
    print("\n## Search (384-d synthetic, unseen queries)")
    for r in search_figures():
        print(f"{r['n']:>7,} items  {r['type']:14s} build {r['build_s']:6.1f} s  p50 {r['p50_ms']:.3f} ms  "
              f"p99 {r['p99_ms']:.3f} ms  recall@10 {r['recall10']:.3f}")


if __name__ == "__main__":
    main()
