"""An API process for the scale tests: `python -m tests.demos_scale.api_process PORT`, configured by TUTOR_*
variables, with the fake encoder (the bank is ingested by the test beforehand)."""

from __future__ import annotations

import sys

import uvicorn

from app.config import Settings
from app.main import create_app
from tests.fakes import FakeEncoder


def main() -> None:
    """Serve the API on 127.0.0.1:PORT until killed."""
    app = create_app(Settings(), lambda _: FakeEncoder(), load_in_background=False)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")


if __name__ == "__main__":
    main()
