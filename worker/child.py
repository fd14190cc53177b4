"""The run process: `python -m worker.child` reads a run spec on stdin, runs the demo, writes JSON lines on stdout.

Lines are {"type": "progress", "message", "fraction"}, then {"type": "result", "result"} or
{"type": "error", "message"}. The worker starts this process in its own session and ends the whole
group when the run finishes, fails, times out or is cancelled.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import sys
import threading
import time
import traceback
from typing import Any

_write_lock = threading.Lock()


def plain(value: Any) -> Any:
    """The value with non-finite floats as strings ("inf", "nan"), so it is strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def emit(event: dict[str, Any]) -> None:
    """Write one event line to the worker."""
    line = json.dumps(plain(event), allow_nan=False)
    with _write_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class DemoContext:
    """What a demo runner gets: its placement, progress reporting, and rank launching."""

    def __init__(self, placement: dict[str, Any]) -> None:
        self.kind: str = placement["kind"]
        self.ids: list[int] = list(placement["ids"])
        self.world_size: int = placement["world_size"]

    def progress(self, message: str, fraction: float | None = None) -> None:
        """Report progress to the worker (relayed to clients as server-sent events)."""
        emit({"type": "progress", "message": message, "fraction": fraction})

    @property
    def backend(self) -> str:
        """The torch.distributed backend multi-rank runs use."""
        return "nccl" if self.kind == "cuda" else "gloo"

    def device(self) -> Any:
        """The torch device of a single-device demo."""
        import torch

        return torch.device("cuda", self.ids[0]) if self.kind == "cuda" else torch.device("cpu")

    def device_names(self) -> list[str]:
        """Human names of the devices used (GPU model names, or 'cpu' per rank)."""
        if self.kind != "cuda":
            return ["cpu"] * max(1, self.world_size)
        import torch

        return [f"cuda:{i} {torch.cuda.get_device_name(i)}" for i in self.ids]

    def run_ranks(self, fn: Any, params: dict[str, Any]) -> list[Any]:
        """Run fn(env, params) on every rank as real processes; the per-rank results."""
        from worker.ranks import run_ranks

        return run_ranks(fn, params, self.world_size, self.ids if self.kind == "cuda" else [], self.progress)


def _watch_parent() -> None:
    """End the whole group if the worker goes away (a backstop for die_with_parent)."""
    parent = os.getppid()
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os.killpg(0, 9)


def main() -> int:
    """Run the demo described on stdin."""
    from worker.ranks import die_with_parent

    die_with_parent()
    threading.Thread(target=_watch_parent, name="watch-parent", daemon=True).start()
    spec = json.loads(sys.stdin.read())
    try:
        import torch  # noqa: F401  (imported before any rank is forked)

        from worker.catalogue import CATALOGUE

        demo = CATALOGUE[spec["demo"]]
        params = demo.params.model_validate(spec["params"])
        module, name = demo.runner.split(":")
        runner = getattr(importlib.import_module(module), name)
        ctx = DemoContext(spec["placement"])
        result = runner(params, ctx)
        result.setdefault("backend", ctx.backend if demo.multi_rank else ctx.kind)
        result.setdefault("devices", ctx.device_names())
        emit({"type": "result", "result": result})
        return 0
    except Exception as exc:
        emit({"type": "error", "message": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=8)})
        return 1


if __name__ == "__main__":
    sys.exit(main())
