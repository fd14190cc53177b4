"""A demo runner that needs no worker: a few progress events and a small SVG chart, in-process."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="320" height="160" viewBox="0 0 320 160">'
    '<rect width="320" height="160" fill="#fff"/>'
    '<polyline points="20,140 100,110 180,70 260,40 300,30" fill="none" stroke="#2f5fd0" stroke-width="3"/>'
    '<text x="20" y="20" font-size="14">bus bandwidth (GB/s) vs message size</text>'
    "<script>alert('never runs: shown as an image')</script></svg>"
)


class FakeDemoRunner:
    """Runs every demo instantly; `fail` names demos whose runs fail."""

    def __init__(self, fail: set[str] | None = None) -> None:
        self.fail = fail or set()
        self.started: list[tuple[str, dict[str, Any]]] = []
        self._ids = itertools.count(1)
        self._names: dict[str, str] = {}

    def start(self, name: str, params: dict[str, Any], *, learner_id: str | None = None, fresh: bool = False) -> str:
        """Record the start and return a run id."""
        run_id = f"run_{next(self._ids)}"
        self.started.append((name, params))
        self._names[run_id] = name
        return run_id

    def events(self, run_id: str) -> Iterator[dict[str, Any]]:
        """Three progress steps."""
        for step in range(1, 4):
            yield {"status": "running", "message": f"step {step} of 3", "fraction": step / 3}

    def result(self, run_id: str) -> dict[str, Any]:
        """A finished run with one series and an SVG chart (or a failure)."""
        name = self._names[run_id]
        if name in self.fail:
            return {"status": "failed", "error": "the worker's processes died"}
        return {
            "status": "succeeded",
            "summary": "Bus bandwidth grows with message size (2 gloo ranks on CPU).",
            "series": [{"name": "busbw_gbps", "x": [1, 2, 3, 4], "y": [0.1, 0.4, 0.9, 1.2]}],
            "chart": {"svg": SVG, "title": "All-reduce bus bandwidth"},
        }
