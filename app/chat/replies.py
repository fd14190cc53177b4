"""Structured tutor replies (text, citations, choices, chart, actions) built from domain results."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

VERDICT_HEAD = {"correct": "**Correct!**", "partial": "**Partly right.**", "incorrect": "**Not quite.**"}


class Citation(BaseModel):
    """Where a sentence comes from: a bank question's file, number and lines, or a study note's file,
    section and lines (no number), with the cited text."""

    n: int
    file: str
    number: int | None = None
    lines: list[int]
    section: str | None = None
    question_id: str | None = None
    question: str | None = None
    snippet: str | None = None
    note: str | None = None
    passage_id: str | None = None  # a study-note passage: the study page opens it (`/#passage=<id>`)


class Choice(BaseModel):
    """An answer option the client can offer as a button; `value` is what gets sent."""

    label: str
    value: str


class Action(BaseModel):
    """A follow-up the client can offer: say something, or follow a demo run."""

    type: Literal["say", "demo_run"]
    label: str
    text: str | None = None
    run_id: str | None = None
    url: str | None = None


class Chart(BaseModel):
    """A demo's result: an image (a data: URL of SVG or PNG, never markup), its data series and a summary."""

    run_id: str
    demo: str
    title: str
    image: str | None = None
    series: list[dict[str, Any]] = Field(default_factory=list)
    summary: str | None = None


class Reply(BaseModel):
    """One tutor message; `text` uses a small Markdown subset (bold, code, bullet lines) and [n] citations."""

    kind: str
    text: str
    citations: list[Citation] = Field(default_factory=list)
    choices: list[Choice] = Field(default_factory=list)
    chart: Chart | None = None
    actions: list[Action] = Field(default_factory=list)
    question_id: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


def say(label: str, text: str | None = None) -> Action:
    """A button that sends a message."""
    return Action(type="say", label=label, text=text or label)


def cite(n: int, source: dict[str, Any], **extra: Any) -> Citation:
    """A numbered citation from a source dict: a bank question's {file, number, lines}, or a note's
    {file, section, lines}."""
    return Citation(n=n, file=source["file"], number=source.get("number"), lines=list(source["lines"]),
                    section=source.get("section"), **extra)


def explanation_parts(explanation: dict[str, Any], n: int) -> tuple[list[str], list[Citation]]:
    """'Why:' with the explanation's citation (numbered from n), then, when that is the question's own
    explanation, the first study-note passage that explains it, cited by note, section and lines."""
    lines: list[str] = []
    citations: list[Citation] = []
    if explanation.get("text") and explanation.get("source"):
        citations.append(cite(n, explanation["source"], question_id=explanation.get("question_id"),
                              question=explanation.get("question"), snippet=explanation["text"],
                              note=explanation.get("note")))
        lines.append(f"**Why:** {explanation['text']} [{n}]")
        n += 1
    passages = explanation.get("passages") or []
    if passages and explanation.get("kind") == "own":
        first = passages[0]
        section = " › ".join(first["heading_path"]) or first["note_title"]
        citations.append(cite(n, {"file": first["file"], "lines": first["lines"], "section": section},
                              snippet=first["text"], passage_id=first.get("id")))
        lines.append(f"**From the notes** ({section}): {first['text']} [{n}]")
    return lines, citations


def question_reply(nxt: dict[str, Any], level: int, topic_names: dict[str, str]) -> Reply:
    """A quiz question: its options as choices, unless the learner asked for harder (own words)."""
    q, progress = nxt["question"], nxt["progress"]
    names = ", ".join(topic_names.get(t, t) for t in q["topics"]) or "general"
    head = f"**Question {progress['answered'] + 1} of {progress['length']}** ({names})"
    options = q["options"] if level == 0 else []
    tail = "Pick one, or type your answer." if options else "Answer in your own words."
    choices = [Choice(label=f"{o['key']}. {o['text']}", value=o["key"]) for o in options]
    return Reply(
        kind="question",
        text=f"{head}\n{q['question']}\n{tail}",
        choices=choices,
        actions=[say("Hint", "hint"), say("Skip", "skip"), say("Harder", "give me something harder")],
        question_id=q["id"],
        citations=[cite(1, q["source"], question_id=q["id"], question=q["question"])],
    )


def _ideas(label: str, ideas: list[str]) -> str | None:
    return f"- {label}: " + "; ".join(ideas) + " [1]" if ideas else None


def _verdict_line(verdict: str, feedback: str) -> str:
    """The verdict in bold, then the grader's feedback (its first words in bold when they say the verdict)."""
    head = VERDICT_HEAD[verdict]
    first, sep, rest = feedback.partition(". ")
    if first and first.casefold().startswith(head.strip("*!.").split()[0].casefold()):
        return f"**{first}{sep.strip()}** {rest}".strip()
    return f"{head} {feedback}".strip()


def grade_reply(result: dict[str, Any], question_text: str, *, skipped: bool = False) -> Reply:
    """The full grading result: verdict, what was right and missing, the answer and explanation, cited."""
    source = result["citation"]
    citations = [cite(1, source, question_id=result["question_id"], question=question_text,
                      snippet=result["accepted_answer"])]
    if skipped:
        lines = ["**Skipped.** I've counted it as not known yet, so it will come back for review soon."]
    else:
        lines = [_verdict_line(result["verdict"], result.get("feedback") or "")]
        # An incorrect answer is wrong as a whole (a swap has the right words in the wrong places): it is
        # not told which ideas it "got".
        got = result["covered_ideas"] if result["verdict"] != "incorrect" else []
        lines += [x for x in (_ideas("What you got", got),
                              _ideas("What was missing", result["missing_ideas"])) if x]
        if result.get("misconception"):
            lines.append(f"- {result['misconception']}")
    lines.append(f"**The answer:** {result['accepted_answer']} [1]")
    why, why_cited = explanation_parts(result["explanation"], 2)
    lines += why
    citations += why_cited
    lines += [f"_Note:_ {c}" for c in result.get("caveats", [])]
    actions = [say("Why?", "why?")]
    actions += [say(f"Show me: {d['title']}", f"run the {d['name']} demo") for d in result.get("related_demos", [])[:1]]
    data = {"verdict": result["verdict"], "score": result["score"], "attempt_id": result.get("attempt_id"),
            "progress": result.get("progress")}
    return Reply(kind="grade", text="\n".join(lines), citations=citations, actions=actions,
                 question_id=result["question_id"], data=data)


def note_citation(n: int, passage: dict[str, Any]) -> Citation:
    """A study-note passage as a numbered citation: note file, section, lines, and the passage to open."""
    return cite(n, passage["source"], snippet=passage["text"], passage_id=passage["id"])


def ask_reply(result: dict[str, Any], topic_choices: list[Choice]) -> Reply:
    """The study-note passages that answer a question, each cited; or "the notes don't cover that",
    with quiz buttons for the nearest topics first."""
    if not result["answered"]:
        nearest = [f"quiz me on {t['name']}" for t in result.get("nearest_topics", [])]
        first = [c for v in nearest for c in topic_choices if c.value == v]
        rest = [c for c in topic_choices if c not in first]
        return Reply(kind="decline", text=result["text"], choices=(first + rest)[:6])
    lines, citations = [], []
    for n, p in enumerate(result["passages"], 1):
        citations.append(note_citation(n, p))
        section = " › ".join(p["heading_path"]) or p["note_title"]
        lines.append(f"{p['text']} [{n}]" if n == 1 else f"- Also in the notes ({section}): {p['text']} [{n}]")
    return Reply(kind="answer", text="\n".join(lines), citations=citations)


def progress_reply(report: dict[str, Any], topic_names: dict[str, str]) -> Reply:
    """Answers, mastery per topic seen, reviews due and streak."""
    seen = sorted((m for m in report["mastery"] if m["seen"]), key=lambda m: m["mastery"])
    lines = [f"You've answered **{report['answered']}** questions, **{report['correct']}** correct."]
    lines.append(f"Reviews due now: **{report['due']}**. Streak: **{report['streak']}** day(s).")
    for m in seen:
        name = topic_names.get(m["topic"], m["topic"])
        lines.append(f"- {name}: {round(100 * m['mastery'])}% mastery ({m['seen']} of {m['questions']} seen)")
    if not seen:
        lines.append("You haven't answered anything yet: say “quiz me” to start.")
    choices = [Choice(label=f"Quiz me on {topic_names.get(m['topic'], m['topic'])}",
                      value=f"quiz me on {topic_names.get(m['topic'], m['topic'])}") for m in seen[:2]]
    summary = {k: report[k] for k in ("answered", "correct", "due", "streak", "mastery")}
    return Reply(kind="progress", text="\n".join(lines), choices=choices, data={"progress": summary})


def topic_choices(topic_names: dict[str, str]) -> list[Choice]:
    """One 'quiz me on ...' button per topic."""
    return [Choice(label=name, value=f"quiz me on {name}") for name in topic_names.values()]


HELP_TEXT = (
    "I'm your GPU tutor. You can say:\n"
    "- “quiz me” or “quiz me on pipeline parallelism”, then answer in your own words\n"
    "- “hint”, “why?”, “skip” or “give me something harder” during a quiz\n"
    "- a question such as “what is reduce-scatter?”\n"
    "- “run the all-reduce demo” or “show me”\n"
    "- “how am I doing?”"
)


def help_reply(topic_names: dict[str, str]) -> Reply:
    """What the tutor understands."""
    return Reply(kind="help", text=HELP_TEXT, actions=[say("Quiz me"), say("How am I doing?")])


def info(text: str, kind: str = "info", **kw: Any) -> Reply:
    """A plain message from the tutor."""
    return Reply(kind=kind, text=text, **kw)
