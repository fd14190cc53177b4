"""Slack's rules: signatures, the five-minute window, malformed payloads, help for unknown sub-commands."""

from __future__ import annotations

import hashlib
import hmac
import json

from app.slack import blocks
from tests.app.slack.fake_slack import FakeSlack
from tests.app.slack.slack_requests import Slack


def test_help_is_the_ack(slack: Slack, fake_slack: FakeSlack) -> None:
    response = slack.command("help")
    assert response.status_code == 200
    assert response.json() == {
        "text": blocks.HELP,
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": blocks.HELP}}],
    }
    assert fake_slack.named("response") == []


def test_unknown_subcommand_answers_with_help(slack: Slack, fake_slack: FakeSlack) -> None:
    response = slack.command("dance now")
    assert response.status_code == 200
    text = f"I don't know `dance`.\n\n{blocks.HELP}"
    assert response.json() == {"text": text, "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]}
    assert [c.method for c in fake_slack.calls if c.method != "auth.test"] == []


def test_bad_signature_is_refused(slack: Slack, fake_slack: FakeSlack) -> None:
    response = slack.command("quiz", secret="not-the-signing-secret")
    assert response.status_code == 401
    assert fake_slack.calls == []


def test_stale_timestamp_is_refused(slack: Slack, fake_slack: FakeSlack) -> None:
    response = slack.command("quiz", age=6 * 60)
    assert response.status_code == 401
    assert fake_slack.calls == []


def test_recent_timestamp_is_accepted(slack: Slack) -> None:
    assert slack.command("help", age=4 * 60).status_code == 200


def test_malformed_payload(slack: Slack, fake_slack: FakeSlack) -> None:
    signed = slack.post("payload=%7Bnot-json", "application/x-www-form-urlencoded")
    assert signed.status_code == 400
    unsigned = slack.post("{not json", "application/json", secret="wrong")
    assert unsigned.status_code == 401
    assert fake_slack.calls == []


def test_url_verification_challenge(slack: Slack) -> None:
    body = json.dumps({"token": "legacy", "challenge": "c-123", "type": "url_verification"})
    response = slack.post(body, "application/json")
    assert response.status_code == 200
    assert response.json() == {"challenge": "c-123"}


def test_a_forged_request_with_a_non_numeric_timestamp_is_refused_and_sends_nothing(
        slack: Slack, fake_slack: FakeSlack) -> None:
    from urllib.parse import urlencode

    form = urlencode({"command": "/tutor", "text": "quiz", "team_id": "T1", "channel_id": "C1", "user_id": "U1",
                      "response_url": f"{fake_slack.url}/response/forged"})
    response = slack.client.post("/slack/events", content=form.encode(), headers={
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": "not-a-number",
        "X-Slack-Signature": "v0=" + "0" * 64,
    })
    slack.settle()
    assert response.status_code == 401
    assert fake_slack.calls == []


def test_an_unsigned_binary_body_is_refused(slack: Slack, fake_slack: FakeSlack) -> None:
    response = slack.client.post("/slack/events", content=bytes(range(256)), headers={
        "Content-Type": "application/json", "X-Slack-Request-Timestamp": "1", "X-Slack-Signature": "v0=00"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_request"
    assert fake_slack.calls == []


def test_a_signed_binary_body_is_a_400(slack: Slack, fake_slack: FakeSlack) -> None:
    import time

    from tests.app.slack.slack_requests import SECRET

    body = bytes(range(256))
    ts = str(int(time.time()))
    digest = hmac.new(SECRET.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    response = slack.client.post("/slack/events", content=body, headers={
        "Content-Type": "application/json", "X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"})
    assert response.status_code == 400
    assert fake_slack.calls == []
