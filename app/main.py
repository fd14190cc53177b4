"""The FastAPI application: create_app builds it; heavy objects are made in the lifespan."""

from __future__ import annotations

import gc
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.types import ASGIApp

from app import health
from app.appeals import endpoints as appeals_endpoints
from app.ask import endpoints as ask_endpoints
from app.bank import endpoints as bank_endpoints
from app.chat import endpoints as chat_endpoints
from app.config import Settings, get_settings
from app.db import schema_is_current
from app.demos import endpoints as demos_endpoints
from app.demos.reports import DemoReports
from app.errors import install_error_handlers
from app.grade_api import endpoints as grade_endpoints
from app.grade_api.fastpath import GradeFastPath
from app.learners import endpoints as learners_endpoints
from app.openapi import complete_openapi
from app.quiz import endpoints as quiz_endpoints
from app.serving.accesslog import AccessLog
from app.serving.admission import ConcurrencyLimit
from app.serving.encoders import EncoderFactory, default_encoder
from app.serving.journal import AttemptJournal
from app.serving.limits_mw import BodyLimit
from app.serving.runtime import Runtime
from app.slack.routes import mount as mount_slack
from app.web import endpoints as web_endpoints
from contracts.http import ErrorShapeCORSMiddleware, SecurityHeaders
from contracts.jobs import JobQueue


class TutorAPI(FastAPI):
    """The FastAPI app with the security headers outside every layer, the server-error layer included.

    Middleware added with `add_middleware` sits inside Starlette's server-error layer, so an unexpected
    500 would leave without them; wrapping the whole stack gives them to every response.
    """

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeaders(super().build_middleware_stack())


def attempt_journal(runtime: Runtime) -> AttemptJournal:
    """The grading API's journal in the data folder, with what earlier processes left in it, moving."""
    settings = runtime.settings
    journal = AttemptJournal(settings.data_dir / "journal", runtime.writer, grade_endpoints.GradedCall,
                             interval_s=settings.journal_interval_ms / 1000, max_pending=settings.journal_max_pending)
    journal.recover()
    journal.start()
    return journal


def start_demo_reports(app: FastAPI, runtime: Runtime) -> DemoReports | None:
    """The demo job queue and the thread that drains the workers' reports (none without a worker token)."""
    settings = runtime.settings
    if not settings.worker_token:
        return None
    app.state.demo_queue = JobQueue(settings.demo_queue, settings.worker_token)
    reports = DemoReports(settings, runtime.factory, JobQueue(settings.demo_queue, settings.worker_token))
    reports.start()
    return reports


def create_app(
    settings: Settings | None = None,
    encoder_factory: EncoderFactory = default_encoder,
    *,
    load_in_background: bool = True,
    freeze_gc: bool = False,
    access_log: bool = False,
) -> FastAPI:
    """Build the app; the model and index load after start-up so /healthz answers at once.

    freeze_gc (for a serving process): once loaded, everything built so far moves out of the
    garbage collector's sight (`gc.freeze`), so full collections no longer walk the model,
    index and rubrics (measured: a 75 ms pause every few hundred requests without it). The
    collector is then turned on, whether or not the load worked: `tutor serve` starts with it
    off (`app.cli.launch`).

    access_log: log each request once its response is sent (`app.serving.accesslog`), for a server whose
    own access log is off, as in `tutor serve`.
    """
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = Runtime.create(settings, encoder_factory, background_checkpoints=True)
        if settings.auto_migrate and not schema_is_current(runtime.engine):
            runtime.migrate()
        app.state.runtime = runtime
        if settings.journal:
            runtime.journal = attempt_journal(runtime)
        def load() -> None:
            try:
                runtime.load()
                if freeze_gc and runtime.problem is None:
                    gc.freeze()
            finally:
                if freeze_gc:
                    gc.enable()

        if load_in_background:
            threading.Thread(target=load, name="tutor-load", daemon=True).start()
        else:
            load()
        runtime.watch(settings.reload_s)  # a newer `tutor ingest` is served without a restart
        reports = start_demo_reports(app, runtime)
        yield
        if reports is not None:
            reports.stop()
        runtime.close()

    app = TutorAPI(
        title="GPU Tutor",
        version="0.1.0",
        summary="A tutor for multi-GPU computing and distributed training, with grounded explanations.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    app.add_middleware(GradeFastPath)  # POST /v1/grade's hot path, inside the limits below
    app.add_middleware(
        ConcurrencyLimit,
        limit=settings.max_concurrent_requests,
        queue=settings.max_queued_requests,
        wait_s=settings.queue_wait_s,
    )
    app.add_middleware(
        BodyLimit, default=settings.max_body_bytes, bulk=settings.max_bulk_body_bytes, timeout_s=settings.body_timeout_s
    )
    # Only the configured origins may call the API from a browser; the token travels in a header, not a cookie.
    # A refused preflight answers in the error shape (400, code "cors_refused").
    app.add_middleware(
        ErrorShapeCORSMiddleware,
        allow_origins=settings.cors_origins,
        allow_methods=["GET", "POST"],
        allow_headers=["Authorization", "Content-Type", "Idempotency-Key"],
        max_age=600,
    )
    if access_log:
        app.add_middleware(AccessLog)  # outermost: it times and logs what every other layer answered
    app.include_router(health.router)
    app.include_router(bank_endpoints.router)
    app.include_router(learners_endpoints.router)
    app.include_router(quiz_endpoints.router)
    app.include_router(appeals_endpoints.router)
    app.include_router(ask_endpoints.router)
    app.include_router(grade_endpoints.router)
    app.include_router(demos_endpoints.router)
    app.include_router(chat_endpoints.router)
    app.include_router(web_endpoints.router)
    mount_slack(app, settings)  # POST /slack/events (Bolt), and /slack/install + /slack/oauth_redirect with OAuth
    complete_openapi(app)  # every error each operation answers, in the document; 405s list every method of the path
    return app
