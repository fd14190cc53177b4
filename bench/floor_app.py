"""The floor under the API: the serving encoder behind the same HTTP server, doing nothing else.

A bare ASGI app on uvicorn (the same HTTP and event-loop implementations as `tutor serve`) that
reads a `POST /v1/grade` body, encodes its answer through the same micro-batcher (a lone request
on the solo session, concurrent ones in batches) and answers with a few bytes. No FastAPI, no key,
no validation model, no grading, no storage, no access log. What a request costs here beyond the
encode is what any Python service around this encoder pays on this machine; what the API costs
beyond this is the product's own work. `bench_floor.py` measures both side by side.

Run: `python floor_app.py --port N` with the project's settings (TUTOR_DATA_DIR for the export).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.config import get_settings
from app.serving.aio import encode
from app.serving.encoders import default_encoder
from app.serving.runtime import batched
from ingest.embedder import Encoder

Scope = dict[str, Any]


class Floor:
    """ASGI app: /readyz once the encoder is built, POST /v1/grade encodes the body's "answer"."""

    def __init__(self) -> None:
        self.encoder: Encoder | None = None

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["path"] == "/readyz":
            await _reply(send, 200 if self.encoder is not None else 503, b'{"status":"ready"}')
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if self.encoder is None:
            await _reply(send, 503, b'{"error":"loading"}')
            return
        vectors = await encode(self.encoder, [json.loads(body)["answer"]])
        await _reply(send, 200, b'{"dim":%d}' % vectors.shape[1])

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.encoder = await asyncio.to_thread(_serving_encoder)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                close = getattr(self.encoder, "close", None)
                if close is not None:
                    close()
                await send({"type": "lifespan.shutdown.complete"})
                return


def _serving_encoder() -> Encoder:
    settings = get_settings()
    return batched(settings, default_encoder(settings))


async def _reply(send: Any, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    """Serve the floor app on 127.0.0.1."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(Floor(), host="127.0.0.1", port=args.port, log_level="warning", access_log=False, ws="none")


if __name__ == "__main__":
    main()
