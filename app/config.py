"""Settings, read once from `TUTOR_*` environment variables; every default works on a laptop."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic_settings import BaseSettings, SettingsConfigDict

from ingest.embedder import DEFAULT_MODEL

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class Settings(BaseSettings):
    """The service's configuration."""

    model_config = SettingsConfigDict(env_prefix="TUTOR_", env_file=None, extra="ignore")

    data_dir: Path = PROJECT_ROOT / "data"
    database_url: str | None = None
    index_dir: Path | None = None
    raw_dir: Path | None = None
    model: str = DEFAULT_MODEL
    auto_migrate: bool = True
    near_duplicate_threshold: float = 0.8
    redis_url: str | None = None
    default_rate_limit: str = "120/minute"
    max_answer_chars: int = 2000
    max_body_bytes: int = 64 * 1024
    max_bulk_body_bytes: int = 1024 * 1024

    @property
    def db_url(self) -> str:
        """The database URL; a SQLite file under data/ unless TUTOR_DATABASE_URL is set."""
        return self.database_url or f"sqlite:///{self.data_dir / 'tutor.db'}"

    @property
    def index_path(self) -> Path:
        """Where index versions and their manifests live."""
        return self.index_dir or self.data_dir / "index"

    @property
    def raw_path(self) -> Path:
        """The default documents to ingest."""
        return self.raw_dir or self.data_dir / "raw"

    @property
    def taxonomy_path(self) -> Path:
        """The topic taxonomy."""
        return self.data_dir / "taxonomy.yaml"

    @property
    def annotations_path(self) -> Path:
        """Author notes and caveats attached to questions."""
        return self.data_dir / "annotations.yaml"


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings (tests build their own `Settings` instead)."""
    return Settings()
