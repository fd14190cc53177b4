"""The dialogue: recognise what the learner means and answer it from the bank, the quiz or a demo.

A new intent goes here (and its words in `intents.py`); `service.py` only carries a turn through
identity, storage and streaming, whatever the intent.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from typing import Any

from app.ask.service import ask
from app.chat import quizzing
from app.chat.context import Context, Turn
from app.chat.demos import DemoRunner, chart_image
from app.chat.intents import (
    ANSWER,
    ASK,
    DEMO,
    EXPLAIN,
    HARDER,
    HINT,
    PROGRESS,
    QUIZ,
    SKIP,
    Intent,
    model_for,
    recognise,
)
from app.chat.replies import Action, Chart, Choice, Reply, ask_reply, help_reply, info, progress_reply, say
from app.errors import TutorError
from app.learners.progress import progress
from contracts.demos import DEMOS, demos_for

log = logging.getLogger(__name__)
FRESH = re.compile(r"\b(fresh|new run|rerun|re-run)\b", re.IGNORECASE)  # "run the all-reduce demo fresh"
DEMO_TIMEOUT = 120.0  # seconds a chat waits for a demo's result before leaving a link to follow it


def understand(ctx: Context, text: str) -> Intent:
    """The learner's intent, in the light of the pending question."""
    pending = quizzing.pending_question(ctx)
    return recognise(
        text,
        pending=pending is not None,
        has_options=quizzing.has_choices(ctx, pending),
        vocab=ctx.vocab,
        model=model_for(ctx.bank.encoder),
    )


def respond(ctx: Context, text: str) -> Turn:
    """The tutor's replies to one learner message (the dialogue state is updated in ctx.state)."""
    intent = understand(ctx, text)
    log.info("chat intent %s (%.2f)", intent.kind, intent.score)
    handlers = {
        QUIZ: lambda: quizzing.on_quiz(ctx, intent),
        HARDER: lambda: quizzing.on_harder(ctx, intent),
        ANSWER: lambda: quizzing.on_answer(ctx, text, intent),
        HINT: lambda: quizzing.on_hint(ctx),
        SKIP: lambda: quizzing.on_skip(ctx),
        EXPLAIN: lambda: quizzing.on_explain(ctx),
        ASK: lambda: on_ask(ctx, text),
        PROGRESS: lambda: on_progress(ctx),
        DEMO: lambda: on_demo(ctx, intent, fresh=bool(FRESH.search(text))),
    }
    turn = handlers.get(intent.kind, lambda: Turn([help_reply(ctx.vocab.topic_names)]))()
    ctx.state.save(ctx.conversation)
    return turn


def on_ask(ctx: Context, text: str) -> Turn:
    """A concept question: the study-note passages that answer it, cited; or "the notes don't cover that"."""
    encoder, index = ctx.bank.require()
    reply = ask_reply(ask(ctx.session, encoder, index, text, ctx.vocab.topic_names), quizzing.topic_buttons(ctx))
    if quizzing.pending_question(ctx) is not None:
        reply.actions.append(say("Back to the question", "quiz me"))
    return Turn([reply])


def on_progress(ctx: Context) -> Turn:
    """Mastery per topic, reviews due, streak."""
    return Turn([progress_reply(progress(ctx.session, ctx.learner_id), ctx.vocab.topic_names)])


def _demo_choices() -> list[Choice]:
    return [Choice(label=title, value=f"run the {name} demo") for name, (title, _) in DEMOS.items()]


def on_demo(ctx: Context, intent: Intent, *, fresh: bool = False) -> Turn:
    """Start the named demo (or the one for the topic at hand) and follow it; a recent result of the same run
    on the same hardware is reused unless the learner asks for a fresh one."""
    name = intent.demo
    if name is None:
        related = demos_for(ctx.state.focus_topics or ctx.state.topics)
        name = related[0]["name"] if related else None
    if name is None:
        return Turn([info("Which demo would you like to run?", "demo_menu", choices=_demo_choices())])
    title = DEMOS[name][0]
    try:
        run_id = ctx.runner.start(name, {}, learner_id=ctx.learner_id, fresh=fresh)
    except TutorError as exc:
        return Turn([info(f"I can't run the {title} demo right now: {exc.message}", "demo_failed")])
    action = Action(type="demo_run", label="Follow the run", run_id=run_id, url=f"/v1/demos/runs/{run_id}")
    started = info(f"Running the **{title}** demo…", "demo_started", actions=[action], data={"run_id": run_id})
    return Turn([started], demo_run=(run_id, name))


def demo_events(runner: DemoRunner, run_id: str, name: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Progress events of a run, then ('reply', the result as a Reply with its chart)."""
    title = DEMOS.get(name, (name, ()))[0]
    deadline = time.monotonic() + DEMO_TIMEOUT
    try:
        for event in runner.events(run_id):
            yield "progress", {"run_id": run_id, "demo": name, **event}
            if time.monotonic() > deadline:
                still = info(f"The {title} demo is still running; follow it with the link.")
                yield "reply", still.model_dump(mode="json")
                return
        result = runner.result(run_id)
    except TutorError as exc:
        yield "reply", info(f"The {title} demo could not finish: {exc.message}", "demo_failed").model_dump(mode="json")
        return
    yield "reply", demo_reply(run_id, name, result).model_dump(mode="json")


def demo_reply(run_id: str, name: str, result: dict[str, Any]) -> Reply:
    """A finished run as a reply: its summary and chart, or why it failed."""
    title = DEMOS.get(name, (name, ()))[0]
    if result.get("status") not in ("succeeded", "done", "completed"):
        return info(f"The {title} demo failed: {result.get('error') or 'no reason given'}", "demo_failed")
    chart = result.get("chart") or {}
    summary = result.get("summary") or ""
    how = {"reused": "a recent result, reused", "shared": "from a run another learner started just before you"}
    where = result.get("measured") or "measured just now"
    kind = how.get(str(result.get("answer")), "a fresh run")
    text = f"**{title}**: {kind}, {where}." + (f"\n{summary}" if summary else "")
    return Reply(
        kind="demo",
        text=text,
        chart=Chart(run_id=run_id, demo=name, title=chart.get("title") or title, image=chart_image(chart),
                    series=list(result.get("series") or []), summary=summary or None),
        actions=[say("Run it fresh", f"run the {name} demo fresh"), say("Quiz me on this", "quiz me")],
    )
