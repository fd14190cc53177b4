"""Run every demo on this host (CUDA and NCCL where present) and print the figures: `scripts/gpu_check`.

Each demo runs exactly as the worker runs it (its own process group, a time limit), with parameters sized
for GPUs when there are GPUs; the whole check is meant to finish in under five minutes.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from worker.catalogue import CATALOGUE
from worker.devices import DeviceInfo, all_slots, detect, place
from worker.runs import Run
from worker.supervisor import execute

MiB = 1024 * 1024


def check_params(info: DeviceInfo) -> dict[str, dict[str, Any]]:
    """Per-demo parameters: GPU-sized with CUDA devices, small on CPU."""
    gpus = len(info.gpus)
    world = min(max(gpus, 2), 8)
    if info.kind != "cuda":
        return {
            "allreduce": {"max_bytes": 4 * MiB},
            "collectives": {},
            "pipeline": {"hidden": 256},
            "zero": {},
            "mixed_precision": {},
            "checkpointing": {"layers": 6, "hidden": 256, "batch": 128},
            "sampler": {},
            "matmul": {"sizes": [256, 512, 1024]},
        }
    return {
        "allreduce": {
            "world_size": world,
            "min_bytes": 64 * 1024,
            "max_bytes": 256 * MiB,
            "iterations": 20,
            "warmup": 5,
        },
        "collectives": {"world_size": world},
        "pipeline": {
            "stages": min(world, 4),
            "hidden": 4096,
            "micro_batch_size": 256,
            "layers_per_stage": 4,
            "micro_batches": [1, 2, 4, 8, 16],
        },
        "zero": {"world_size": world, "layers": 8, "hidden": 2048},
        "mixed_precision": {"steps": 30},
        "checkpointing": {"layers": 24, "hidden": 4096, "batch": 1024, "steps": 5},
        "sampler": {"world_size": world},
        "matmul": {"sizes": [1024, 2048, 4096, 8192], "iterations": 20},
    }


def _allreduce(f: dict[str, Any]) -> list[str]:
    lines = [
        f"  {r['bytes']:>10} B {r['time_us']:>10.1f} us algbw {r['algbw_GBps']:9.3f}  busbw {r['busbw_GBps']:9.3f} GB/s"
        for r in f["rows"]
    ]
    return [*lines, f"  peak busbw {f['peak_busbw_GBps']:.3f} GB/s; link peak {f['link_peak_GBps']}"]


def _pipeline(f: dict[str, Any]) -> list[str]:
    return [
        f"  {r['schedule']:5} m={r['micro_batches']:<2} bubble {r['measured_bubble']:.3f} "
        f"(theory {r['theory_bubble']:.3f}, wall clock {r['wall_clock_bubble']:.3f}) "
        f"stage-0 activations {r['peak_activation_bytes_stage0'] / MiB:.1f} MiB"
        for r in f["rows"]
    ]


def headline(name: str, result: dict[str, Any]) -> list[str]:
    """The figures worth a line each."""
    f = result["figures"]
    if name == "allreduce":
        return _allreduce(f)
    if name == "pipeline":
        return _pipeline(f)
    if name == "zero":
        ratios = ", ".join(f"{k} {v:.3f}" for k, v in f["optimizer_state_ratio_vs_plain"].items())
        return [f"  optimizer state / plain DP: {ratios} (ideal {f['ideal_ratio']:.3f}); Ψ={f['parameters_psi']:,}"]
    if name == "mixed_precision":
        return [
            f"  {mode:16} final loss {s['final_loss']:.4f}  zero grads {s['mean_zero_grad_fraction']:.2%}"
            for mode, s in f["summary"].items()
        ]
    if name == "checkpointing":
        return [f"  memory ratio {f['memory_ratio']:.2f}, time ratio {f['time_ratio']:.2f} ({f['memory_method']})"]
    if name == "matmul":
        return [
            f"  n={r['n']:<5} {r['tflops']:8.3f} TFLOPS  fraction of peak {r['fraction_of_peak']}" for r in f["rows"]
        ]
    if name == "collectives":
        return [f"  every collective's result checked: {f['all_correct']}"]
    return [
        f"  same order every epoch without set_epoch: {f['same_order_every_epoch_without_set_epoch']}, "
        f"with: {f['same_order_every_epoch_with_set_epoch']}"
    ]


def run_one(name: str, values: dict[str, Any], info: DeviceInfo) -> bool:
    """Run one demo like the worker does and print its figures; whether it succeeded."""
    demo = CATALOGUE[name]
    params = demo.params.model_validate({"time_limit_s": 120, **values})
    placement = place(info, demo.world_size(params), all_slots(info))
    assert placement is not None
    run = Run(f"check-{name}", name, params.model_dump(), demo.world_size(params), params.time_limit_s)
    run.placement = placement
    start = time.monotonic()
    status, result, error = execute(run, lambda event: None)
    took = time.monotonic() - start
    if status != "succeeded" or result is None:
        print(f"{name}: {status} after {took:.0f}s: {error}")
        return False
    print(f"{name}: backend {result['backend']}, devices {', '.join(result['devices'])} ({took:.0f}s)")
    for line in headline(name, result):
        print(line)
    return True


def main(argv: list[str] | None = None) -> int:
    """Run the demos named (default: all) and print their figures; exit 1 if any failed."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("demos", nargs="*", default=list(CATALOGUE))
    parser.add_argument("--cpu", action="store_true", help="ignore GPUs")
    args = parser.parse_args(argv)
    info = detect("cpu" if args.cpu else "auto")
    print(f"devices: {info.kind} {info.gpus or ''} ({info.cpu_count} CPUs)")
    params = check_params(info)
    ok = [run_one(name, params[name], info) for name in args.demos]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
