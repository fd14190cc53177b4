"""Block Kit messages of the bot: questions, verdicts, grounded answers, stats, the leaderboard, help."""

from __future__ import annotations

from typing import Any

from app.slack.daily import Standing

Message = dict[str, Any]
MAX_TEXT = 2900  # a section's text may hold 3000 characters
VERDICTS = {"correct": "✅ *Correct*", "partial": "🟡 *Partly right*", "incorrect": "❌ *Not quite*"}
APPEAL, NEXT, CHOICE = "tutor_appeal", "tutor_next", "tutor_choice"

HELP = (
    "*GPU Tutor* — practise multi-GPU computing and distributed training.\n"
    "• `/tutor quiz [topic]` — a quiz; answer by replying in the thread (or with the buttons)\n"
    "• `/tutor ask <question>` — a grounded answer with its sources\n"
    "• `/tutor stats` — your progress\n"
    "• `/tutor leaderboard` — this week's daily-question leaderboard\n"
    "• `/tutor help` — this message\n"
    "Mention me (`@tutor what is ring all-reduce?`) to ask in a channel."
)


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:MAX_TEXT]}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:MAX_TEXT]}]}


def _button(text: str, action_id: str, value: str, style: str | None = None) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "text": {"type": "plain_text", "text": text[:75]},
        "action_id": action_id,
        "value": value,
    }
    if style:
        button["style"] = style
    return button


def cite(source: dict[str, Any] | None) -> str:
    """A citation line: file, question number (or a note's section) and lines."""
    if not source:
        return "no source"
    first, last = source["lines"]
    where = f"Q{source['number']}" if source.get("number") is not None else source.get("section") or "notes"
    return f"{source['file']} · {where} · lines {first}–{last}"


def help_message(prefix: str | None = None) -> Message:
    """The list of commands, after an optional line (e.g. for an unknown sub-command)."""
    text = f"{prefix}\n\n{HELP}" if prefix else HELP
    return {"text": text, "blocks": [_section(text)]}


def question_message(question: dict[str, Any], *, title: str, hint: str) -> Message:
    """A question: its text, the options as buttons when it has them, and how to answer."""
    options = question["options"]
    lines = [f"*{title}*", question["question"]]
    lines += [f"*{o['key']}.* {o['text']}" for o in options]
    blocks: list[dict[str, Any]] = [_section("\n".join(lines))]
    if options:
        elements = [_button(o["key"], f"{CHOICE}_{o['key']}", f"{question['id']}:{o['key']}") for o in options]
        blocks.append({"type": "actions", "block_id": "tutor_answer", "elements": elements})
    topics = ", ".join(question["topics"]) or "general"
    blocks.append(_context(f"{hint} · topics: {topics}"))
    return {"text": f"{title}: {question['question']}", "blocks": blocks}


def _explanation_lines(result: dict[str, Any]) -> list[str]:
    explanation = result.get("explanation") or {}
    lines = []
    if result.get("misconception"):
        lines.append(f"_{result['misconception']}_")
    if explanation.get("text"):
        note = f" ({explanation['note']})" if explanation.get("note") else ""
        lines.append(f"*Why:* {explanation['text']}{note}")
    passages = explanation.get("passages") or []
    if passages and explanation.get("kind") == "own":
        lines.append(f"*From the notes:* {passages[0]['text']}")
    if result.get("verdict") != "correct":
        lines.append(f"*Accepted answer:* {result['accepted_answer']}")
    return lines


def verdict_message(result: dict[str, Any], *, user_id: str, can_continue: bool) -> Message:
    """The verdict on an answer with its explanation and citation; 'I was right' unless it was correct."""
    verdict = VERDICTS.get(result["verdict"], result["verdict"])
    head = f"{verdict}, <@{user_id}>. {result.get('feedback') or ''}".strip()
    source = (result.get("explanation") or {}).get("source") or result.get("citation")
    blocks: list[dict[str, Any]] = [_section(head)]
    blocks += [_section(line) for line in _explanation_lines(result)]
    blocks.append(_context(f"📖 Source: {cite(source)}"))
    explanation = result.get("explanation") or {}
    if explanation.get("kind") == "own" and explanation.get("passages"):
        first = explanation["passages"][0]
        section = " › ".join(first["heading_path"]) or first["note_title"]
        where = {"file": first["file"], "lines": first["lines"], "section": section}
        blocks.append(_context(f"📝 Notes: {cite(where)}"))
    buttons = []
    if result["verdict"] != "correct":
        buttons.append(_button("I was right", APPEAL, result["attempt_id"]))
    if can_continue:
        buttons.append(_button("Next question", NEXT, "next", style="primary"))
    if buttons:
        blocks.append({"type": "actions", "block_id": "tutor_verdict", "elements": buttons})
    return {"text": f"{result['verdict']}: {result.get('feedback') or ''}".strip(), "blocks": blocks}


def quiz_done_message(nxt: dict[str, Any]) -> Message:
    """The end of a quiz, with its score."""
    p = nxt["progress"]
    text = (
        f"That's the end of this quiz ({nxt['reason']}): {p['correct']} correct and {p['partial']} partly right "
        f"out of {p['answered']}. `/tutor quiz` starts another."
    )
    return {"text": text, "blocks": [_section(text)]}


def concept_message(question: str, answer: dict[str, Any]) -> Message:
    """The study-note passages that answer a question, cited; or "the notes don't cover that" with the
    nearest topics (the same path as the chat's and the API's /v1/ask)."""
    if not answer["answered"]:
        text = f"> {question}\n{answer['text']}"
        return {"text": answer["text"], "blocks": [_section(text)]}
    blocks: list[dict[str, Any]] = [_section(f"> {question}\n{answer['text']}")]
    cites = [f"{i}. {cite(p['source'])} — _{p['note_title']}_" for i, p in enumerate(answer["passages"], 1)]
    blocks.append(_context("📖 From the study notes:\n" + "\n".join(cites)))
    return {"text": answer["text"], "blocks": blocks}


def stats_message(stats: dict[str, Any]) -> Message:
    """The user's progress in a few lines."""
    lines = [
        "*Your progress*",
        f"Answered: {stats['answered']} ({stats['correct']} correct) · Streak: {stats['streak']} day(s) · "
        f"Due for review: {stats['due']}",
    ]
    seen = sorted((m for m in stats["mastery"] if m["seen"]), key=lambda m: m["mastery"])
    if seen:
        lines.append("Mastery: " + ", ".join(f"{m['topic']} {round(100 * m['mastery'])}%" for m in seen[:5]))
    else:
        lines.append("No answers yet: `/tutor quiz` starts one.")
    text = "\n".join(lines)
    return {"text": text, "blocks": [_section(text)]}


def leaderboard_message(standings: list[Standing]) -> Message:
    """This week's leaderboard of daily-question answers."""
    if not standings:
        text = "*This week's leaderboard*\nNo daily-question answers yet this week."
    else:
        rows = [
            f"{i}. <@{s.user_id}> — {s.points} points ({s.correct} correct of {s.answered})"
            for i, s in enumerate(standings, 1)
        ]
        text = "*This week's leaderboard*\n" + "\n".join(rows)
    return {"text": text, "blocks": [_section(text)]}
