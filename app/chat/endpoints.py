"""HTTP routes of the chat: a turn as JSON or as server-sent events over POST, and the history."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request, status
from fastapi.responses import StreamingResponse
from sqlalchemy import select

from app.chat.demos import DemoRunner, demo_runner
from app.chat.schemas import ChatIn, ChatOut, ConversationOut, ConversationSummary
from app.chat.service import begin, identify, run_turn, sse_stream, stream_turn
from app.chat.store import history, learner_for_token, new_conversation, owned_conversation
from app.deps import RuntimeDep, SessionDep
from app.errors import ForbiddenError, UnauthorizedError
from app.keys.deps import CHAT_LIMIT
from app.models import Conversation, as_utc
from app.serving.admission import EventStream, open_stream

router = APIRouter(prefix="/v1/chat", tags=["chat"])


def allowed_origin(request: Request) -> None:
    """Refuse browser requests from origins that are not configured (same-origin pages are always fine)."""
    origin = request.headers.get("origin")
    if origin is None:
        return  # not a browser's cross-site request
    allowed = request.app.state.runtime.settings.cors_origins
    own = f"{request.url.scheme}://{request.headers.get('host', '')}"
    if origin != own and origin not in allowed and "*" not in allowed:
        raise ForbiddenError(f"origin {origin!r} is not allowed to use the chat", details={"origin": origin})


def bearer(authorization: Annotated[str | None, Header(max_length=200)] = None) -> str | None:
    """The learner token from `Authorization: Bearer <token>`, if given."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise UnauthorizedError("use 'Authorization: Bearer <chat token>'")
    return token.strip()


TokenDep = Annotated[str | None, Depends(bearer)]
RunnerDep = Annotated[DemoRunner, Depends(demo_runner)]
OriginCheck = [Depends(allowed_origin)]
# Turns and new conversations: the origin is checked first, so a refused origin takes nothing of the limit.
LimitedOriginCheck = [Depends(allowed_origin), CHAT_LIMIT]


def _required(token: str | None) -> str:
    if token is None:
        raise UnauthorizedError("this needs the learner's chat token: 'Authorization: Bearer <token>'")
    return token


@router.post("", response_model=ChatOut, dependencies=LimitedOriginCheck)
def chat(body: ChatIn, session: SessionDep, runtime: RuntimeDep, runner: RunnerDep, token: TokenDep) -> dict[str, Any]:
    """Send a message and get the tutor's replies (without a token, a new learner and token are issued)."""
    conversation, issued = begin(session, token, body.conversation_id)
    events = run_turn(session, runtime, runner, conversation, body.message)
    replies = [data for name, data in events if name == "reply"]
    return {"conversation_id": conversation.id, "token": issued, "replies": replies}


@router.post(
    "/stream",
    dependencies=LimitedOriginCheck,
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "meta, reply*, progress*, error?, done"}},
)
def chat_stream(
    request: Request, body: ChatIn, session: SessionDep, runtime: RuntimeDep, runner: RunnerDep, token: TokenDep
) -> StreamingResponse:
    """The same turn as server-sent events: meta, each reply as it is ready, demo progress, done.

    An open stream counts against the open-stream bounds, not the request limit (429 or 503 beyond them).
    """
    settings = runtime.settings
    ticket = open_stream(request, settings.max_open_streams, settings.max_open_streams_per_client)
    conversation, issued = begin(session, token, body.conversation_id)
    # The session dependency commits when this function returns, before the stream opens its own transactions.
    meta = {"conversation_id": conversation.id, "token": issued}
    events = stream_turn(runtime, runner, conversation.id, body.message)
    return EventStream(ticket, sse_stream(meta, events))


def _summary(c: Conversation) -> dict[str, Any]:
    return {"id": c.id, "created_at": as_utc(c.created_at).isoformat(), "updated_at": as_utc(c.updated_at).isoformat()}


@router.post("/conversations", response_model=ConversationOut, status_code=status.HTTP_201_CREATED,
             dependencies=LimitedOriginCheck)
def start_conversation(session: SessionDep, token: TokenDep) -> dict[str, Any]:
    """Start a new conversation (issuing a learner token when none is given)."""
    learner_id, issued = identify(session, token)
    conversation = new_conversation(session, learner_id)
    return {**_summary(conversation), "token": issued, "messages": []}


@router.get("/conversations", response_model=list[ConversationSummary], dependencies=OriginCheck)
def list_conversations(session: SessionDep, token: TokenDep) -> list[dict[str, Any]]:
    """The token's learner's conversations, latest first."""
    learner_id = learner_for_token(session, _required(token))
    rows = session.scalars(
        select(Conversation).where(Conversation.learner_id == learner_id).order_by(Conversation.updated_at.desc())
    )
    return [_summary(c) for c in rows]


@router.get("/conversations/{conversation_id}", response_model=ConversationOut, dependencies=OriginCheck)
def get_conversation(conversation_id: str, session: SessionDep, token: TokenDep) -> dict[str, Any]:
    """A conversation's messages, for the token's own learner only (403 for anyone else's)."""
    learner_id = learner_for_token(session, _required(token))
    conversation = owned_conversation(session, learner_id, conversation_id)
    return {**_summary(conversation), "messages": history(session, conversation)}
