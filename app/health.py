"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from app.deps import RuntimeDep
from app.errors import UnavailableError, error_body
from app.keys.deps import rate_limiter_of

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", response_model=None)
def readyz(request: Request, runtime: RuntimeDep) -> dict[str, Any] | JSONResponse:
    """Database reachable, rate-limit storage (Redis, when configured) reachable, model and index loaded,
    checked and matching; 503 with the reason otherwise."""
    try:
        runtime.check_database()
        if runtime.settings.redis_url:  # keyed calls fail closed without it (app/keys/ratelimit.py)
            rate_limiter_of(request.app.state, runtime).check()
        encoder, index = runtime.require()
    except UnavailableError as exc:
        return JSONResponse(error_body(exc.code, exc.message), 503, headers={"Retry-After": "5"})
    out = {
        "status": "ready",
        "model": encoder.model_id,
        "backend": runtime.backend,
        "index_version": index.version[:16],
        "vectors": len(index.entries),
    }
    if runtime.journal is not None:  # graded calls answered and not in the database yet
        out["journal_pending"] = runtime.journal.pending
    return out
