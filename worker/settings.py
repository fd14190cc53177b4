"""Worker settings, read once from `TUTOR_WORKER_*` environment variables."""

from __future__ import annotations

from typing import Literal

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
