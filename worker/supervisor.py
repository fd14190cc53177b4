"""Execute one run: start the run process in its own session, relay its events, enforce the time limit and
cancellation, and always end its whole process group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from worker.procs import end_group
from worker.runs import Outcome, Run

ROOT = Path(__file__).resolve().parent.parent


def _child_env(run: Run) -> dict[str, str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.pop("TUTOR_WORKER_TOKEN", None)  # demo code has no use for the secret
    if run.placement is not None and run.placement.kind == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU run must not touch (or initialise) a GPU
    return env


class _Reader:
    """Reads the run process's event lines (stdout) and keeps the tail of its stderr."""

    def __init__(self, proc: subprocess.Popen[str], emit: Callable[[dict[str, Any]], None]) -> None:
        self.emit = emit
        self.result: dict[str, Any] | None = None
        self.error: str | None = None
        self.stderr: deque[str] = deque(maxlen=30)
        assert proc.stdout is not None and proc.stderr is not None
        self.threads = [
            threading.Thread(target=self._events, args=(proc.stdout,), daemon=True),
            threading.Thread(target=self._errors, args=(proc.stderr,), daemon=True),
        ]
        for t in self.threads:
            t.start()

    def _events(self, stream: IO[str]) -> None:
        for line in stream:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                self.stderr.append(line.rstrip())
                continue
            if event.get("type") == "result":
                self.result = event["result"]
            elif event.get("type") == "error":
                self.error = event.get("message", "the demo failed")
                self.stderr.extend(str(event.get("traceback", "")).splitlines()[-10:])
            else:
                self.emit({"type": "progress", "message": event.get("message"), "fraction": event.get("fraction")})

    def _errors(self, stream: IO[str]) -> None:
        for line in stream:
            if "Warning" not in line and "return func(" not in line:
                self.stderr.append(line.rstrip())

    def join(self) -> None:
        """Wait (briefly) for both streams to be drained."""
        for t in self.threads:
            t.join(timeout=5)


def _wait(proc: subprocess.Popen[str], run: Run) -> Outcome | None:
    """Wait for the process; an outcome if it had to be stopped (cancel, time limit), else None."""
    deadline = time.monotonic() + run.time_limit_s
    while True:
        try:
            proc.wait(timeout=0.1)
            return None
        except subprocess.TimeoutExpired:
            pass
        if run.cancel.is_set():
            return "cancelled", None, "cancelled by request; all its processes were ended"
        if time.monotonic() > deadline:
            return "failed", None, f"time limit of {run.time_limit_s}s exceeded; all its processes were ended"


def execute(run: Run, emit: Callable[[dict[str, Any]], None]) -> Outcome:
    """Run the demo in a new process group; whatever happens, no process of the group outlives this call."""
    assert run.placement is not None
    spec = {"demo": run.demo, "params": run.params, "placement": run.placement.as_dict()}
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker.child"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # the child leads a new process group: killpg ends it and every rank
        env=_child_env(run),
        cwd=ROOT,
    )
    run.pgid = proc.pid
    reader = _Reader(proc, emit)
    try:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(spec))
        proc.stdin.close()
        stopped = _wait(proc, run)
    finally:
        left = end_group(proc.pid)
        proc.wait()
        reader.join()
    if left:
        return "failed", None, f"processes {left} of the run could not be ended"
    if stopped is not None:
        return stopped
    if proc.returncode == 0 and reader.result is not None:
        return "succeeded", reader.result, None
    detail = "\n".join(list(reader.stderr)[-8:])
    message = reader.error or f"the run process exited with code {proc.returncode}"
    return "failed", None, f"{message}\n{detail}".strip()
