"""Worker settings, read once from `TUTOR_WORKER_*` environment variables."""

from __future__ import annotations

import socket
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class WorkerSettings(BaseSettings):
    """The demo worker's configuration (the token is required to serve)."""

    model_config = SettingsConfigDict(env_prefix="TUTOR_WORKER_", env_file=None, extra="ignore")

    token: str | None = None
    # auto: CUDA (and NCCL for multi-rank demos) when present; cpu: never touch a GPU.
    device: Literal["auto", "cpu"] = "auto"
    max_queue: int = 4
    max_time_limit_s: int = 300
    history: int = 100
    retry_after_s: int = 10
    # The shared job queue (redis://host:6379/0, or a SQLite file on this machine); None: local runs only.
    queue_url: str | None = None
    # How this worker is named in the API's records (its id adds a random suffix per start).
    name: str = Field(default_factory=socket.gethostname, max_length=64)
    heartbeat_s: float = Field(default=2.0, gt=0)
    # The largest gloo run this worker takes on its CPU (default: its cores, 2 to 8), and at most this many GPUs.
    cpu_ranks: int | None = Field(default=None, ge=1, le=8)
    gpus: int | None = Field(default=None, ge=0)
