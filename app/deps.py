"""Request dependencies: the runtime and one database session per request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from app.db import transaction
from app.serving.runtime import Runtime


async def get_runtime(request: Request) -> Runtime:
    """The process runtime built in the app's lifespan (async: no worker thread for a lookup)."""
    runtime: Runtime = request.app.state.runtime
    return runtime


def get_session(runtime: Annotated[Runtime, Depends(get_runtime)]) -> Iterator[Session]:
    """One session per request: commit on success, roll back on error."""
    with transaction(runtime.factory) as session:
        yield session


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
# scope="function": commit before the response is sent, so a client's next request sees the write.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]
