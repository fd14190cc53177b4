"""Security: tokens own conversations, CORS admits only configured origins, learner text is stored as text."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.config import Settings

EVIL = "https://evil.example"
ALLOWED = "http://localhost:8000"


def _start(client: TestClient, message: str = "hello") -> tuple[str, str]:
    body = client.post("/v1/chat", json={"message": message}).json()
    return body["token"], body["conversation_id"]


def test_one_learners_token_cannot_read_or_write_anothers_conversation(chat: TestClient) -> None:
    alice_token, alice_conv = _start(chat, "quiz me")
    bob_token, bob_conv = _start(chat)
    assert alice_token != bob_token
    bob = {"Authorization": f"Bearer {bob_token}"}
    read = chat.get(f"/v1/chat/conversations/{alice_conv}", headers=bob)
    assert read.status_code == 404 and read.json()["error"]["code"] == "not_found"
    assert "quiz me" not in read.text
    write = chat.post("/v1/chat", json={"message": "skip", "conversation_id": alice_conv}, headers=bob)
    assert write.status_code == 404
    stream = chat.post("/v1/chat/stream", json={"message": "skip", "conversation_id": alice_conv}, headers=bob)
    assert stream.status_code == 404
    assert chat.get(f"/v1/chat/conversations/{alice_conv}").status_code == 401  # no token at all
    listed = chat.get("/v1/chat/conversations", headers=bob).json()
    assert [c["id"] for c in listed] == [bob_conv]
    own = chat.get(f"/v1/chat/conversations/{alice_conv}", headers={"Authorization": f"Bearer {alice_token}"})
    assert own.status_code == 200 and own.json()["messages"][0]["text"] == "quiz me"


def test_cors_preflight_admits_only_configured_origins(chat: TestClient, settings: Settings) -> None:
    assert ALLOWED in settings.cors_origins
    ask = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type"}
    ok = chat.options("/v1/chat/stream", headers={"Origin": ALLOWED, **ask})
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == ALLOWED
    refused = chat.options("/v1/chat/stream", headers={"Origin": EVIL, **ask})
    assert refused.status_code == 400 and "access-control-allow-origin" not in refused.headers


def test_a_request_from_a_disallowed_origin_is_refused(chat: TestClient) -> None:
    res = chat.post("/v1/chat", json={"message": "hello"}, headers={"Origin": EVIL})
    assert res.status_code == 403 and "access-control-allow-origin" not in res.headers
    assert "not allowed" in res.json()["error"]["message"]
    allowed = chat.post("/v1/chat", json={"message": "hello"}, headers={"Origin": ALLOWED})
    assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == ALLOWED
    same = chat.post("/v1/chat", json={"message": "hello"}, headers={"Origin": "http://testserver"})
    assert same.status_code == 200  # the study page served by this app


def test_cors_origins_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUTOR_CORS_ORIGINS", "https://a.example, https://b.example/")
    assert Settings().cors_origins == ["https://a.example", "https://b.example"]


def test_learner_html_is_kept_as_text_and_never_echoed_as_markup(chat: TestClient) -> None:
    payload = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    body = chat.post("/v1/chat", json={"message": payload}).json()
    headers = {"Authorization": f"Bearer {body['token']}"}
    history = chat.get(f"/v1/chat/conversations/{body['conversation_id']}", headers=headers)
    assert history.headers["content-type"].startswith("application/json")
    assert history.json()["messages"][0]["text"] == payload  # stored verbatim; clients render it as text
