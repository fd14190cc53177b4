"""/tutor quiz: the question as Block Kit, answers by thread reply or button, verdicts, appeals, retries."""

from __future__ import annotations

from typing import Any

from app.config import Settings
from tests.app.slack.db import appeals, count_attempts, pending
from tests.app.slack.fake_slack import TEAM, FakeSlack
from tests.app.slack.slack_requests import CHANNEL, OTHER, USER, Slack


def question_payload(q: dict[str, Any], title: str, thread_ts: str | None = None) -> dict[str, Any]:
    """The exact chat.postMessage payload of a question."""
    lines = [f"*{title}*", q["question"], *[f"*{o['key']}.* {o['text']}" for o in q["options"]]]
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)}}]
    hint = "Reply in this thread to answer"
    if q["options"]:
        hint = "Reply in this thread or pick an option"
        blocks.append(
            {
                "type": "actions",
                "block_id": "tutor_answer",
                "elements": [
                    {
                        "type": "button",
                        "text": {"type": "plain_text", "text": o["key"]},
                        "action_id": f"tutor_choice_{o['key']}",
                        "value": f"{q['id']}:{o['key']}",
                    }
                    for o in q["options"]
                ],
            }
        )
    blocks.append(
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": f"{hint} · topics: {', '.join(q['topics']) or 'general'}"}],
        }
    )
    # slack_sdk adds the workspace id to the calls of the request's client
    payload = {"channel": CHANNEL, "text": f"{title}: {q['question']}", "blocks": blocks, "team_id": TEAM}
    return {**payload, "thread_ts": thread_ts} if thread_ts else payload


def cite(source: dict[str, Any]) -> str:
    return f"📖 Source: {source['file']} · Q{source['number']} · lines {source['lines'][0]}–{source['lines'][1]}"


def start(slack: Slack, fake: FakeSlack, settings: Settings) -> tuple[str, dict[str, Any]]:
    """/tutor quiz; returns the thread ts and the question posted."""
    response = slack.command("quiz")
    assert response.status_code == 200
    [posted] = fake.wait_for("chat.postMessage")
    root = f"1700000000.{1:06d}"
    question = pending(settings, root)
    assert posted.payload == question_payload(question, "Question 1 of 2")
    assert posted.token == "xoxb-test-token"
    return root, question


def test_quiz_question_then_graded_thread_reply(slack: Slack, fake_slack: FakeSlack, slack_settings: Settings) -> None:
    root, question = start(slack, fake_slack, slack_settings)
    assert slack.reply(root, question["accepted"]).status_code == 200
    verdict = fake_slack.wait_for("chat.postMessage", 2)[1].payload
    assert verdict["channel"] == CHANNEL and verdict["thread_ts"] == root
    blocks = verdict["blocks"]
    assert blocks[0]["text"]["text"].startswith(f"✅ *Correct*, <@{USER}>.")
    if question["explanation"]:
        assert {"type": "section", "text": {"type": "mrkdwn", "text": f"*Why:* {question['explanation']}"}} in blocks
        assert {"type": "context", "elements": [{"type": "mrkdwn", "text": cite(question["citation"])}]} in blocks
    assert blocks[-1] == {
        "type": "actions",
        "block_id": "tutor_verdict",
        "elements": [
            {
                "type": "button",
                "text": {"type": "plain_text", "text": "Next question"},
                "action_id": "tutor_next",
                "value": "next",
                "style": "primary",
            }
        ],
    }
    assert count_attempts(slack_settings) == 1

    verdict_ts = "1700000000.000002"
    slack.click("tutor_next", "next", verdict_ts, thread_ts=root)
    nxt = fake_slack.wait_for("chat.postMessage", 3)[2].payload
    second = pending(slack_settings, root)
    assert second["id"] != question["id"]
    assert nxt == question_payload(second, "Question 2 of 2", thread_ts=root)


def test_retried_event_is_never_graded_twice(slack: Slack, fake_slack: FakeSlack, slack_settings: Settings) -> None:
    root, question = start(slack, fake_slack, slack_settings)
    slack.reply(root, question["accepted"], event_id="EvRETRY01")
    fake_slack.wait_for("chat.postMessage", 2)
    again = slack.reply(root, question["accepted"], event_id="EvRETRY01", retry=1)
    assert again.status_code == 200
    slack.reply(root, question["accepted"], event_id="EvRETRY01", retry=2)
    assert len(fake_slack.named("chat.postMessage")) == 2
    assert count_attempts(slack_settings) == 1


def test_wrong_answer_offers_i_was_right(slack: Slack, fake_slack: FakeSlack, slack_settings: Settings) -> None:
    root, _ = start(slack, fake_slack, slack_settings)
    slack.reply(root, "the quick brown fox jumps over the lazy dog")
    verdict = fake_slack.wait_for("chat.postMessage", 2)[1].payload
    actions = verdict["blocks"][-1]["elements"]
    appeal = next(a for a in actions if a["action_id"] == "tutor_appeal")
    assert appeal["text"]["text"] == "I was right"
    assert verdict["blocks"][0]["text"]["text"].split(",")[0] in ("❌ *Not quite*", "🟡 *Partly right*")

    slack.click("tutor_appeal", appeal["value"], "1700000000.000002", thread_ts=root, user=OTHER)
    assert fake_slack.wait_for("response")[0].payload["text"] == "You can only appeal your own answers."
    slack.click("tutor_appeal", appeal["value"], "1700000000.000002", thread_ts=root)
    told = fake_slack.wait_for("response", 2)[1].payload
    assert told == {
        "text": "Thanks: your appeal is filed for an author to review, and your reviews now count the answer as right.",
        "response_type": "ephemeral",
        "replace_original": False,
    }
    assert len(appeals(slack_settings)) == 1
    slack.click("tutor_appeal", appeal["value"], "1700000000.000002", thread_ts=root)
    assert fake_slack.wait_for("response", 3)[2].payload["text"] == "this attempt has already been appealed"


def test_other_users_replies_are_not_graded(slack: Slack, fake_slack: FakeSlack, slack_settings: Settings) -> None:
    root, question = start(slack, fake_slack, slack_settings)
    slack.reply(root, question["accepted"], user=OTHER)
    assert len(fake_slack.named("chat.postMessage")) == 1
    assert count_attempts(slack_settings) == 0
