"""How the chat runs demos: a small runner interface that the demos proxy (or a test fake) provides."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any, Protocol

from fastapi import Request

from app.errors import UnavailableError


class DemoRunner(Protocol):
    """Starts demo runs and reports on them; calls block, so they run in the thread pool."""

    def start(self, name: str, params: dict[str, Any], *, learner_id: str | None = None, fresh: bool = False) -> str:
        """Start a run of the named demo for the learner (fresh: never reuse a recent result); returns the run id
        (raises UnavailableError when it can't)."""
        ...

    def events(self, run_id: str) -> Iterator[dict[str, Any]]:
        """Progress events ({"status", "message", "fraction"}) until the run ends."""
        ...

    def result(self, run_id: str) -> dict[str, Any]:
        """The ended run: {"status", "summary", "series", "chart": {"svg" or "png_base64", "title"}, "error"},
        and how it was answered: "answer" (fresh, shared, reused) and "measured" ('measured 4 minutes ago on ...')."""
        ...


class NoDemoRunner:
    """Used when no demo service is configured: every start says so."""

    def start(self, name: str, params: dict[str, Any], *, learner_id: str | None = None, fresh: bool = False) -> str:
        """Refuse: there is nothing to run demos on."""
        raise UnavailableError("live demos are not available on this server")

    def events(self, run_id: str) -> Iterator[dict[str, Any]]:
        """No events."""
        return iter(())

    def result(self, run_id: str) -> dict[str, Any]:
        """No result."""
        raise UnavailableError("live demos are not available on this server")


def demo_runner(request: Request) -> DemoRunner:
    """The app's demo runner: `app.state.demo_runner` if set (e.g. a test fake), else runs through the job queue."""
    runner: DemoRunner | None = getattr(request.app.state, "demo_runner", None)
    if runner is not None:
        return runner
    from app.chat.worker_runner import QueueDemoRunner

    runtime = request.app.state.runtime
    return QueueDemoRunner(runtime.settings, runtime.factory, getattr(request.app.state, "demo_queue", None))


def chart_image(chart: dict[str, Any] | None) -> str | None:
    """A data: URL for a result's chart, so clients show it as an image and never parse it as markup."""
    if not chart:
        return None
    if isinstance(chart.get("svg"), str) and chart["svg"].lstrip().startswith(("<svg", "<?xml")):
        return "data:image/svg+xml;base64," + base64.b64encode(chart["svg"].encode()).decode()
    if isinstance(chart.get("png_base64"), str):
        base64.b64decode(chart["png_base64"], validate=True)  # refuse anything that isn't base64
        return "data:image/png;base64," + chart["png_base64"]
    return None
