"""HTTP route of grounded Q&A."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from app.ask.service import ask
from app.deps import RuntimeDep, SessionDep
from app.keys.deps import ASK_LIMIT
from contracts.text import PlainText
from ingest.taxonomy import load_taxonomy

router = APIRouter(prefix="/v1", tags=["ask"])


class AskIn(BaseModel):
    """A concept question."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"text": "what does reduce-scatter do in FSDP?"}]}
    )
    text: PlainText = Field(min_length=1, max_length=500)


@router.post("/ask", dependencies=[ASK_LIMIT])  # per client address without an API key
def ask_route(body: AskIn, session: SessionDep, runtime: RuntimeDep) -> dict[str, Any]:
    """The study-note passages that answer the question, with citations; or "the notes don't cover that"
    with the nearest topics."""
    encoder, index = runtime.require()
    names = {t.id: t.name for t in load_taxonomy(runtime.settings.taxonomy_path).topics}
    return ask(session, encoder, index, body.text, names)
