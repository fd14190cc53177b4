"""Process-group housekeeping on Linux: end a run's whole group and check nothing of it is left running."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgrp) of a process from /proc, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[2])


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes in a process group."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat and stat[2] == pgid and stat[0] not in ("Z", "X"):
                members.append(int(entry.name))
    return members


def descendants(pid: int) -> list[int]:
    """Live (not zombie) descendants of a process."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat and stat[0] not in ("Z", "X"):
                children.setdefault(stat[1], []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def end_group(pgid: int, wait_s: float = 5.0) -> list[int]:
    """SIGKILL every process of the group and wait until none is running; the pids still alive (should be [])."""
    deadline = time.monotonic() + wait_s
    while True:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        left = group_members(pgid) if Path("/proc").is_dir() else []
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)
