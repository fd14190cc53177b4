"""Run every demo on this host through the job queue (CUDA and NCCL where present) and print the figures:
`scripts/gpu_check`.

The check plays the API's part on a private SQLite queue: it signs a job per demo onto the queue of its
placement class, a worker (the same consumer and run queue as `tutor worker`, in this process) takes it and
runs it exactly as for a learner (its own process group, a time limit), and the check reads the worker's
signed reports back. Parameters are sized for GPUs when there are GPUs; the whole check is meant to finish
in under five minutes.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from contracts.jobs import JobQueue, hardware_kind, job_body, queue_name, verify
from worker.catalogue import CATALOGUE
from worker.consumer import Consumer
from worker.devices import DeviceInfo, detect
from worker.runs import RunQueue
from worker.settings import WorkerSettings
from worker.supervisor import execute

MiB = 1024 * 1024


def check_params(info: DeviceInfo) -> dict[str, dict[str, Any]]:
    """Per-demo parameters: GPU-sized for a run that fits this host's GPUs, small for one on CPU ranks.

    A run of n ranks takes n GPUs, one process each (NCCL does not put two ranks on one GPU), so on a
    host with one GPU the single-device demos run on it and the multi-rank ones on CPU ranks (gloo).
    """
    cpu = _cpu_params()
    if info.kind != "cuda":
        return cpu
    sized = _gpu_params(min(max(len(info.gpus), 2), 8))
    return {name: values if on_gpus(info, _ranks(name, values)) else cpu[name] for name, values in sized.items()}


def on_gpus(info: DeviceInfo, world: int) -> bool:
    """Whether a run of `world` ranks goes to this host's GPUs (one each), not to CPU ranks."""
    return info.kind == "cuda" and len(info.gpus) >= world


def _ranks(name: str, values: dict[str, Any]) -> int:
    demo = CATALOGUE[name]
    return demo.world_size(demo.params.model_validate(values))


def _cpu_params() -> dict[str, dict[str, Any]]:
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


def _gpu_params(world: int) -> dict[str, dict[str, Any]]:
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


class QueueCheck:
    """A private queue with one in-process worker on this host's devices."""

    def __init__(self, info: DeviceInfo, folder: Path) -> None:
        token = secrets.token_hex(16)
        settings = WorkerSettings(token=token, queue_url=str(folder / "queue.db"), name="gpu-check", heartbeat_s=1.0,
                                  max_time_limit_s=300)
        self.info = info
        self.jobs = JobQueue(str(settings.queue_url), token)
        self.runs = RunQueue(settings, info, execute)
        self.consumer = Consumer(settings, self.runs, JobQueue(str(settings.queue_url), token), info)
        self.runs.listener = self.consumer.listen
        self.runs.start()
        self.consumer.start()

    def close(self) -> None:
        """Stop the worker."""
        self.consumer.stopping()
        self.runs.stop()
        self.consumer.stop()

    def run(self, name: str, params: dict[str, Any], time_limit_s: float) -> dict[str, Any]:
        """Queue one job and wait for its outcome report: {"status", "result", "error", "hardware"}."""
        demo = CATALOGUE[name]
        values = demo.params.model_validate(params)
        world = demo.world_size(values)
        gpu = on_gpus(self.info, world)
        kind = hardware_kind("cuda", self.info.gpus[0]) if gpu else "cpu"
        job_id = f"j_check_{name}"
        self.jobs.put_job(queue_name(kind, world), job_body(
            job_id=job_id, attempt=1, demo=name, params=values.model_dump(mode="json"), world_size=world, kind=kind,
            seq_base=1, expires_at=time.time() + time_limit_s))
        outcome: dict[str, Any] = {"status": "failed", "error": "no report before the time limit", "result": None}
        deadline = time.monotonic() + time_limit_s + 30
        while time.monotonic() < deadline:
            data = self.jobs.next_report()
            if data is None:
                time.sleep(0.1)
                continue
            body = verify(self.jobs.token, data)
            if body.get("job") != job_id:
                continue
            if body["type"] == "claimed":
                outcome["hardware"] = body.get("hardware")
            elif body["type"] in ("done", "dropped", "abandoned"):
                outcome.update(status=body.get("status", "failed"), error=body.get("error") or body.get("reason"),
                               result=body.get("result"))
                return outcome
        return outcome


def run_one(name: str, values: dict[str, Any], check: QueueCheck) -> bool:
    """Run one demo through the queue like a learner's run and print its figures; whether it succeeded."""
    params = {"time_limit_s": 120, **values}
    start = time.monotonic()
    outcome = check.run(name, params, 150)
    took = time.monotonic() - start
    result = outcome.get("result")
    if outcome["status"] != "succeeded" or result is None:
        print(f"{name}: {outcome['status']} after {took:.0f}s: {outcome.get('error')}")
        return False
    where = (outcome.get("hardware") or {}).get("label", "?")
    print(f"{name}: backend {result['backend']}, devices {', '.join(result['devices'])} on {where} ({took:.0f}s)")
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
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as folder:
        check = QueueCheck(info, Path(folder))
        try:
            ok = [run_one(name, params[name], check) for name in args.demos]
        finally:
            check.close()
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
