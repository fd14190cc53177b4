"""`tutor worker`: serve the demo worker."""

from __future__ import annotations

from typing import Annotated

import typer


def worker_command(
    host: Annotated[str, typer.Option(help="interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port")] = 8100,
) -> None:
    """Serve the live-demo worker (needs TUTOR_WORKER_TOKEN; uses CUDA/NCCL when present)."""
    import uvicorn

    from worker.api import create_worker_app
    from worker.settings import WorkerSettings

    settings = WorkerSettings()
    if not settings.token:
        typer.echo("TUTOR_WORKER_TOKEN must be set (the API sends the same value as TUTOR_WORKER_TOKEN).", err=True)
        raise typer.Exit(2)
    # open event streams must not hold a shutdown (and the runs it cancels) hostage
    uvicorn.run(create_worker_app(settings), host=host, port=port, log_level="info", timeout_graceful_shutdown=10)
