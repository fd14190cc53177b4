"""Start a demo's ranks as real processes with torch.distributed (NCCL on GPUs, gloo on CPU) and collect results.

Runs inside the run process (worker.child). CPU ranks are forked (the run process has imported torch but run
nothing, so forking is safe and saves a torch import per rank); GPU ranks are spawned, since CUDA does not
survive a fork. Every rank dies with its parent, and the worker ends the whole process group anyway.
"""

from __future__ import annotations

import os
import queue
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

Progress = Callable[[str, float | None], None]


class RankFailure(RuntimeError):
    """A rank raised, or its process died; the run fails."""


def die_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies (no-op elsewhere)."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


@dataclass
class RankEnv:
    """What a rank function gets: its rank, the world, the backend and its device."""

    rank: int
    world_size: int
    backend: str
    device: torch.device
    messages: Any

    def progress(self, message: str, fraction: float | None = None) -> None:
        """Report progress (only rank 0's reports are relayed)."""
        if self.rank == 0:
            self.messages.put(("progress", self.rank, (message, fraction)))

    def sync(self) -> None:
        """Wait for queued GPU work, so host timers measure it."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


RankFn = Callable[[RankEnv, dict[str, Any]], Any]


def _rank_main(
    fn: RankFn, rank: int, world: int, ids: list[int], init: str, messages: Any, params: dict[str, Any]
) -> None:
    die_with_parent()
    backend = "nccl" if ids else "gloo"
    try:
        if ids:
            device = torch.device("cuda", ids[rank])
            torch.cuda.set_device(device)
        else:
            device = torch.device("cpu")
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
        dist.init_process_group(backend, init_method=init, rank=rank, world_size=world, timeout=timedelta(seconds=60))
        value = fn(RankEnv(rank, world, backend, device, messages), params)
        dist.barrier()
        messages.put(("result", rank, value))
        dist.destroy_process_group()
    except BaseException:
        messages.put(("error", rank, traceback.format_exc(limit=6)))
        messages.close()
        messages.join_thread()
        os._exit(1)  # skip destroy_process_group: it can hang while peers are gone


def run_ranks(fn: RankFn, params: dict[str, Any], world: int, ids: list[int], progress: Progress) -> list[Any]:
    """Run fn on `world` ranks (NCCL on cuda `ids` when given, else gloo on CPU); the per-rank results in order."""
    ctx: Any = mp.get_context("spawn" if ids else "fork")
    messages = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="tutor-demo-") as tmp:
        init = f"file://{tmp}/rendezvous"
        procs = [
            ctx.Process(target=_rank_main, args=(fn, r, world, ids, init, messages, params), daemon=True)
            for r in range(world)
        ]
        for proc in procs:
            proc.start()
        try:
            results = _collect(procs, messages, progress)
        finally:
            for proc in procs:
                if proc.is_alive():
                    proc.kill()
            for proc in procs:
                proc.join(timeout=5)
    return [results[r] for r in range(world)]


def _collect(procs: list[Any], messages: Any, progress: Progress) -> dict[int, Any]:
    results: dict[int, Any] = {}
    exited_at: float | None = None
    while len(results) < len(procs):
        try:
            kind, rank, value = messages.get(timeout=0.2)
        except queue.Empty:
            dead = [(r, p.exitcode) for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
            if dead:
                rank, code = dead[0]
                raise RankFailure(f"rank {rank} died (exit code {code})") from None
            if all(p.exitcode == 0 for p in procs):
                # the last results may still be in the pipe; give them a moment, then give up
                exited_at = exited_at or time.monotonic()
                if time.monotonic() - exited_at > 5:
                    raise RankFailure("ranks exited without reporting a result") from None
            continue
        if kind == "progress":
            progress(*value)
        elif kind == "error":
            raise RankFailure(f"rank {rank} failed:\n{value}")
        else:
            results[rank] = value
    return results
