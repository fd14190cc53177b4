"""Freed heap memory goes back to the system in a serving process (glibc's malloc_trim)."""

from __future__ import annotations

import ctypes.util
import threading
import time

import pytest

from app.serving.memtrim import heap_trimmer


def _glibc() -> bool:
    name = ctypes.util.find_library("c")
    return name is not None and hasattr(ctypes.CDLL(name), "malloc_trim")


@pytest.mark.skipif(not _glibc(), reason="malloc_trim is glibc's")
def test_memory_freed_on_a_worker_thread_goes_back_to_the_system() -> None:
    import psutil

    trim = heap_trimmer()
    assert trim is not None
    process = psutil.Process()

    def churn() -> None:  # many mid-sized blocks (below mmap's threshold) in a thread's own arena, then freed
        blocks = [bytearray(64 * 1024) for _ in range(3000)]
        del blocks[1::2]  # the survivors keep the heap's top in place: only a trim releases the holes
        keep.append(blocks)

    keep: list[list[bytearray]] = []
    thread = threading.Thread(target=churn)
    thread.start()
    thread.join()
    before = process.memory_info().rss
    trim()
    after = process.memory_info().rss
    keep.clear()
    assert before - after > 50 * 2**20  # about half of the ~190 MB churned was free inside the heap


def test_the_housekeeping_thread_trims_and_reloads_on_their_own_periods(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.serving import runtime as runtime_module
    from app.serving.runtime import Runtime

    calls: list[str] = []
    monkeypatch.setattr(runtime_module, "heap_trimmer", lambda: lambda: calls.append("trim") or True)
    stop = threading.Event()
    fake = type("R", (), {"_stop": stop, "_every": Runtime._every, "background_checkpoints": False,
                          "reload_if_changed": lambda self: calls.append("reload")})()
    Runtime.watch(fake, 0.02, trim_s=0.06)  # type: ignore[arg-type]
    time.sleep(0.5)
    stop.set()
    assert 12 <= calls.count("reload") <= 25 and 4 <= calls.count("trim") <= 9
    assert calls.count("reload") > 2 * calls.count("trim")


def test_a_failing_housekeeping_task_does_not_stop_the_others(monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    from app.serving import runtime as runtime_module
    from app.serving.runtime import Runtime

    trims: list[int] = []
    monkeypatch.setattr(runtime_module, "heap_trimmer", lambda: lambda: trims.append(1) or True)

    def reload_fails(self: object) -> bool:
        raise RuntimeError("the database went away")

    stop = threading.Event()
    fake = type("R", (), {"_stop": stop, "_every": Runtime._every, "background_checkpoints": False,
                          "reload_if_changed": reload_fails})()
    Runtime.watch(fake, 0.02, trim_s=0.04)  # type: ignore[arg-type]
    time.sleep(0.3)
    stop.set()
    assert len(trims) >= 4 and "housekeeping task" in caplog.text and "went away" in caplog.text
