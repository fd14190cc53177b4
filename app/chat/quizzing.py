"""The quiz side of the chat: start or continue, grade answers, hints, skip, harder, why."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from app.ask.service import ask
from app.bank.repository import get_question
from app.bank.views import source_of
from app.chat.context import Context, Turn
from app.chat.hints import hints_for, reveals
from app.chat.intents import Intent
from app.chat.replies import (
    Choice,
    Reply,
    cite,
    explanation_parts,
    grade_reply,
    info,
    note_citation,
    question_reply,
    say,
    topic_choices,
)
from app.models import Attempt, Question, QuizSession
from app.quiz.service import create_session, next_question, session_progress, submit_answer

QUIZ_LENGTH = 10
SKIPPED_ANSWER = "I don't know"  # graded as evasive: incorrect, so the card comes back soon


def active_quiz(ctx: Context) -> QuizSession | None:
    """The conversation's quiz session, if it has one."""
    sid = ctx.state.quiz_session_id
    return ctx.session.get(QuizSession, sid) if sid else None


def pending_question(ctx: Context) -> Question | None:
    """The question waiting for an answer, if any."""
    quiz = active_quiz(ctx)
    if quiz is None or not quiz.current_question_id:
        return None
    question = ctx.session.get(Question, quiz.current_question_id)
    return question if question is not None and question.status == "active" else None


def has_choices(ctx: Context, question: Question | None) -> bool:
    """Whether the pending question is shown with options (not after 'harder')."""
    return question is not None and ctx.state.level == 0 and bool(question.wrong_options)


def _start(ctx: Context, topics: list[str]) -> QuizSession:
    quiz = create_session(ctx.session, learner_id=ctx.learner_id, topics=topics, length=QUIZ_LENGTH, mode="adaptive")
    ctx.state.quiz_session_id, ctx.state.topics, ctx.state.hints = quiz.id, topics, 0
    return quiz


def ask_next(ctx: Context, quiz: QuizSession | None = None) -> list[Reply]:
    """The next question of the quiz (a new quiz when there is none or it is over)."""
    quiz = quiz or active_quiz(ctx)
    if quiz is None or session_progress(ctx.session, quiz)["done"]:
        quiz = _start(ctx, ctx.state.topics)
    nxt = next_question(ctx.session, quiz)
    if nxt["done"]:
        progress = nxt["progress"]
        ctx.state.quiz_session_id = None
        text = (f"That's the end of this quiz ({nxt['reason']}): {progress['correct']} correct, "
                f"{progress['partial']} partly right out of {progress['answered']}.")
        return [info(text, "quiz_done", actions=[say("Quiz me again", "quiz me"), say("How am I doing?")])]
    ctx.state.hints = 0
    ctx.state.focus_topics = list(nxt["question"]["topics"])
    return [question_reply(nxt, ctx.state.level, ctx.vocab.topic_names)]


def on_quiz(ctx: Context, intent: Intent) -> Turn:
    """'quiz me [on X]': start a quiz on the topic, or continue the one running."""
    if intent.unknown_topic and not intent.topic:
        text = f"I have no questions on “{intent.unknown_topic}”. These are the topics I can quiz you on:"
        return Turn([info(text, "decline", choices=topic_choices(ctx.vocab.topic_names))])
    if intent.topic:
        return Turn(ask_next(ctx, _start(ctx, [intent.topic])))
    pending = pending_question(ctx)
    if pending is not None:
        return Turn([info("This one is still waiting for your answer (or say “hint” or “skip”):"), _reshow(ctx)])
    return Turn(ask_next(ctx))


def _reshow(ctx: Context) -> Reply:
    quiz = active_quiz(ctx)
    assert quiz is not None
    return question_reply(next_question(ctx.session, quiz), ctx.state.level, ctx.vocab.topic_names)


def on_harder(ctx: Context, intent: Intent) -> Turn:
    """'harder': no more options to pick from; the pending question is asked again without them."""
    ctx.state.level = 1
    lead = info("Harder it is: from now on, answer in your own words (no options to pick from).")
    if intent.topic:
        return Turn([lead, *ask_next(ctx, _start(ctx, [intent.topic]))])
    if pending_question(ctx) is not None:
        return Turn([lead, _reshow(ctx)])
    return Turn([lead, *ask_next(ctx)])


def _submit(ctx: Context, question: Question, answer: str, choice: str | None) -> dict[str, Any]:
    quiz = active_quiz(ctx)
    assert quiz is not None
    return submit_answer(
        ctx.session, ctx.bank.grading(), session_id=quiz.id, question_id=question.id, answer=answer, choice=choice
    )


def on_answer(ctx: Context, text: str, intent: Intent) -> Turn:
    """Grade the answer to the pending question with the full result, then ask the next one."""
    question = pending_question(ctx)
    if question is None:
        return Turn([info("There's no question waiting for an answer. Say “quiz me” to start a quiz.",
                          actions=[say("Quiz me")])])
    choice = intent.choice if has_choices(ctx, question) else None
    result = _submit(ctx, question, text[: ctx.max_answer_chars], choice)
    ctx.state.last_question_id = question.id
    return Turn([grade_reply(result, question.text), *ask_next(ctx)])


def on_skip(ctx: Context) -> Turn:
    """Skip: counted as not known (so it comes back soon), the answer shown with its citation, then the next."""
    question = pending_question(ctx)
    if question is None:
        return Turn([info("Nothing to skip right now. Say “quiz me” for a question.", actions=[say("Quiz me")])])
    result = _submit(ctx, question, SKIPPED_ANSWER, None)
    ctx.state.last_question_id = question.id
    return Turn([grade_reply(result, question.text, skipped=True), *ask_next(ctx)])


def on_hint(ctx: Context) -> Turn:
    """The next hint for the pending question, from its own material, never its answer."""
    question = pending_question(ctx)
    if question is None:
        return Turn([info("Hints come with quiz questions. Say “quiz me” to get one.", actions=[say("Quiz me")])])
    answer = question.accepted_answers[0]
    hints = [h for h in hints_for(question, with_options=has_choices(ctx, question)) if not reveals(h, answer)]
    if ctx.state.hints >= len(hints):
        return Turn([info("That's all the hints I have for this one. Have a go, or say “skip”.",
                          actions=[say("Skip", "skip")])])
    hint = hints[ctx.state.hints]
    ctx.state.hints += 1
    citation = cite(1, source_of(question), question_id=question.id, question=question.text)
    return Turn([Reply(kind="hint", text=f"**Hint {ctx.state.hints}:** {hint} [1]", citations=[citation],
                       question_id=question.id, actions=[say("Another hint", "hint"), say("Skip", "skip")])])


def _last_attempt(ctx: Context, question_id: str) -> Attempt | None:
    return ctx.session.scalars(
        select(Attempt)
        .where(Attempt.learner_id == ctx.learner_id, Attempt.question_id == question_id)
        .order_by(Attempt.created_at.desc())
    ).first()


def on_explain(ctx: Context) -> Turn:
    """'why?': the grounded explanation of the last answered question, with related material, all cited."""
    qid = ctx.state.last_question_id
    attempt = _last_attempt(ctx, qid) if qid else None
    if qid is None or attempt is None:
        if pending_question(ctx) is not None:
            return Turn([info("I'll explain once you've answered. Want a hint instead?",
                              actions=[say("Hint", "hint"), say("Skip", "skip")])])
        return Turn([info("Ask me about a concept, e.g. “what is reduce-scatter?”, or say “quiz me”.")])
    question = get_question(ctx.session, qid, include_retired=True)
    return Turn([_explanation(ctx, question, attempt.result)])


def _explanation(ctx: Context, question: Question, result: dict[str, Any]) -> Reply:
    source = source_of(question)
    citations = [cite(1, source, question_id=question.id, question=question.text, snippet=question.accepted_answers[0])]
    lines = [f"The answer to “{question.text}” is: {question.accepted_answers[0]} [1]"]
    explanation = result.get("explanation") or {}
    why, why_cited = explanation_parts(explanation, 2)
    lines += why
    citations += why_cited
    if result.get("misconception"):
        lines.append(f"- {result['misconception']}")
    encoder, index = ctx.bank.require()
    seen = {p["id"] for p in explanation.get("passages") or []}
    for passage in ask(ctx.session, encoder, index, question.text)["passages"]:
        if passage["id"] in seen or len(citations) >= 4:
            continue
        n = len(citations) + 1
        citations.append(note_citation(n, passage))
        section = " › ".join(passage["heading_path"]) or passage["note_title"]
        lines.append(f"- More in the notes ({section}): {passage['text']} [{n}]")
    return Reply(kind="explanation", text="\n".join(lines), citations=citations, question_id=question.id)


def topic_buttons(ctx: Context) -> list[Choice]:
    """Quiz buttons for every topic."""
    return topic_choices(ctx.vocab.topic_names)
