"""The `tutor` script's entry point (`python -m app.cli.launch` runs the same).

It is kept apart from `app.cli.main` so that it runs before the command line's imports. `tutor serve`
spends most of its time to ready importing the serving stack (FastAPI, SQLAlchemy, pydantic,
numpy, faiss), so before that it:

- turns the cyclic garbage collector off. The imports make some 150,000 objects that live as
  long as the process, and the collector's passes over them while they are made find almost
  nothing to free (about a thousand objects). The app turns it back on once it has loaded
  (`create_app(freeze_gc=True)`).
- starts building the serving encoder on a thread (`app.serving.encoders.build_early`): onnxruntime
  builds its sessions without holding the GIL, so this overlaps the imports.

Measured by `bench/bench_api.py` (start-up to ready); docs/PERFORMANCE.md, "Start-up and memory".
"""

from __future__ import annotations

import gc
import sys


def main() -> None:
    """Run the command line; `serve` starts with the collector off and its encoder on the way."""
    if sys.argv[1:2] == ["serve"]:
        gc.disable()
        from app.serving.encoders import build_early

        build_early()
    from app.cli.main import app

    app()


if __name__ == "__main__":
    main()
