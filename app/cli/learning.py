"""`tutor grade`, `tutor eval` and `tutor appeals`: grading from the command line, and author review."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from app.config import get_settings
from app.db import transaction
from app.serving.runtime import Runtime

appeals_app = typer.Typer(help="Review learners' appeals ('I was right').", no_args_is_help=True)
err = Console(stderr=True)
out = Console()


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def _loaded() -> Runtime:
    runtime = Runtime.create(get_settings())
    runtime.load()
    if runtime.problem:
        err.print(f"[red]{runtime.problem}[/]")
        raise typer.Exit(1)
    return runtime


def grade(
    answer: Annotated[str, typer.Argument(help="the answer to grade")],
    question_id: Annotated[str | None, typer.Option("--question-id", help="a bank question")] = None,
    question: Annotated[str | None, typer.Option(help="a question not in the bank")] = None,
    reference: Annotated[list[str] | None, typer.Option(help="reference answer (repeatable)")] = None,
    wrong: Annotated[list[str] | None, typer.Option(help="wrong answer (repeatable)")] = None,
    choice: Annotated[str | None, typer.Option(help="option key, e.g. B")] = None,
) -> None:
    """Grade one answer and print the verdict as JSON."""
    from app.answers.service import grade_bank_answer
    from app.errors import NotFoundError
    from app.grading import GradingItem, prepare
    from app.grading import grade as grade_answer

    if (question_id is None) == (question is None) or (question and not reference):
        err.print("[red]give --question-id ID, or --question TEXT with at least one --reference[/]")
        raise typer.Exit(2)
    runtime = _loaded()
    encoder, index, book = runtime.grading()
    if question is not None:
        rubric = prepare(GradingItem(question, list(reference or []), list(wrong or [])), book.encoder)
        _print_json({**grade_answer(rubric, answer, encoder, choice=choice).to_dict(), "model": encoder.model_id})
        return
    try:
        with transaction(runtime.factory) as session:
            _, _, body = grade_bank_answer(session, book, encoder, index, str(question_id), answer, choice)
    except NotFoundError as exc:
        err.print(f"[red]{exc.message}[/]")
        raise typer.Exit(1) from exc
    _print_json(body)


def evaluate(
    file: Annotated[Path | None, typer.Argument(help="labelled answers (JSONL), e.g. data/eval/dev.jsonl")] = None,
    asag: Annotated[bool, typer.Option("--asag", help="the SemEval-2013 training splits, grouped by question")] = False,
    ask: Annotated[
        bool, typer.Option("--ask", help="the ask path on labelled learner questions (default data/eval/ask.jsonl)")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="figures as JSON")] = False,
) -> None:
    """Accuracy and macro-F1 (3-way and correct-vs-not), confusion matrix, per kind, plain cosine and the
    previous grader version beside; with --asag, grouped cross-validation on the ASAG splits; with --ask,
    the ask path's recall@3 and the precision and recall of its abstention."""
    from grading_lab.evaluation import evaluate as run_eval
    from grading_lab.evaluation import format_report, summary
    from ingest.embedder import SentenceTransformerEncoder

    if asag:
        _asag_report(as_json)
        return
    if ask:
        _ask_report(file or get_settings().data_dir / "eval" / "ask.jsonl", as_json)
        return
    if file is None or not file.is_file():
        err.print(f"[red]no such file: {file}[/]" if file is not None else "[red]name a labelled file, or --asag[/]")
        raise typer.Exit(2)
    _use_late_judge()
    report = run_eval(file, SentenceTransformerEncoder(get_settings().model), previous=True)
    if as_json:
        _print_json(summary(report))
    else:
        out.print(format_report(report))


def _use_late_judge() -> None:
    """Grade as served: bank questions' answers read by the late judge too, on the index's int8 export."""
    from app.grading.judges import offline_late_judge, use_late_judge
    from app.grading.pairjudge import JudgeArtifactError

    try:
        use_late_judge(offline_late_judge(get_settings()))
    except JudgeArtifactError as exc:
        err.print(f"[red]{exc}[/]")
        raise typer.Exit(1) from exc


def _ask_report(file: Path, as_json: bool) -> None:
    """Retrieval and abstention of the ask path, exactly as served, on a labelled question set."""
    from app.ask.relevance import default_relevance
    from grading_lab.ask_eval import decide, figures, format_figures, load_items, observe

    if not file.is_file():
        err.print(f"[red]no such file: {file}[/]")
        raise typer.Exit(2)
    try:
        items = load_items(file)
    except ValueError as exc:
        err.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc
    runtime = _loaded()
    encoder, index = runtime.require()
    with transaction(runtime.factory) as session:
        observations = observe(session, encoder, index, items)
    result = figures(observations, decide(default_relevance(), observations))
    if as_json:
        _print_json(result)
    else:
        out.print(format_figures(result))


def _asag_report(as_json: bool) -> None:
    """On each ASAG training split: the served grader with no examples (with the foreign head and by the
    decision alone), and with the question's other answers as labelled examples (with and without the
    example head, the head in grouped CV); the previous grader's and cosine's grouped CV; the foreign
    head's grouped CV and the pair judge's figures on the ASAG questions held out of its own training
    (recorded in their manifests: measuring them takes a judge trained without those questions)."""
    from app.grading.foreign import FOREIGN_PATH
    from grading_lab.asag import CORPORA, asag_crossval
    from grading_lab.examples_fit import SET_OF, fit, without_examples
    from ingest.embedder import SentenceTransformerEncoder

    encoder = SentenceTransformerEncoder(get_settings().model)
    figures: dict[str, Any] = {}
    _, head, _ = fit(encoder)
    bare = without_examples(encoder)
    for name in CORPORA:
        r = asag_crossval(encoder, name)
        part = SET_OF[name]  # the example head's set of this split's answers
        figures[name] = {"folds": r.folds, "previous_grader_macro_f1_2": round(r.grader_f1, 4),
                         "cosine_macro_f1_2": round(r.cosine_f1, 4),
                         "cosine_oracle_macro_f1_2": round(r.cosine_oracle_f1, 4),
                         "served_no_examples_macro_f1_2": round(bare[name]["served"], 4),
                         "served_no_examples_decision_alone_macro_f1_2": round(bare[name]["decision_alone"], 4),
                         "served_examples_set": part,
                         "served_examples_without_head_macro_f1_2": round(head.without_head[part], 4),
                         "served_examples_grouped_cv_macro_f1_2": round(head.grouped_cv[part], 4),
                         "served_examples_teacher_grouped_cv_macro_f1_2": round(head.teacher[part], 4),
                         "served_examples_other_split_head_macro_f1_2": round(head.cross_split.get(part, 0.0), 4),
                         "served_examples_confusion": head.confusion[part]}
    figures["inline_answers_with_examples"] = {
        "without_head_macro_f1_2": round(head.without_head["inline_answers"], 4),
        "grouped_cv_macro_f1_2": round(head.grouped_cv["inline_answers"], 4),
        "without_head_macro_f1_3": round(head.grouped_cv_3way["inline_answers_without_head"], 4),
        "grouped_cv_macro_f1_3": round(head.grouped_cv_3way["inline_answers"], 4)}
    figures["dev_with_examples"] = {"without_head_macro_f1_2": round(head.unfitted["dev_without_head"], 4),
                                    "head_macro_f1_2": round(head.unfitted["dev"], 4),
                                    "head_macro_f1_3": round(head.unfitted["dev_3way"], 4)}
    foreign_manifest = json.loads(FOREIGN_PATH.read_text(encoding="utf-8"))
    figures["foreign_head_recorded"] = foreign_manifest["figures"]
    manifest = json.loads((get_settings().judge_dir / "judge.json").read_text(encoding="utf-8"))
    figures["pair_judge_held_out"] = manifest.get("asag_heldout")
    if as_json:
        _print_json(figures)
        return
    for name in CORPORA:
        f = figures[name]
        out.print(f"{name:12s} correct-vs-not macro-F1 of the served grader: no examples "
                  f"{f['served_no_examples_macro_f1_2']:.3f} (the foreign head was fitted on this split's answers: its "
                  f"grouped CV is below; decision alone {f['served_no_examples_decision_alone_macro_f1_2']:.3f}); "
                  f"the question's other answers as examples ({f['served_examples_set']}) "
                  f"{f['served_examples_grouped_cv_macro_f1_2']:.3f} (example head in grouped CV by question; "
                  f"without the head {f['served_examples_without_head_macro_f1_2']:.3f}, head fitted on the other two "
                  f"sets {f['served_examples_other_split_head_macro_f1_2']:.3f}; 8 to 16 of them "
                  f"{f['served_examples_teacher_grouped_cv_macro_f1_2']:.3f})")
        out.print(f"{'':12s} grouped-CV verdicts (label->verdict): {f['served_examples_confusion']}")
        out.print(f"{'':12s} {f['folds']}-fold CV by question: previous grader "
                  f"{f['previous_grader_macro_f1_2']:.3f}, cosine {f['cosine_macro_f1_2']:.3f} "
                  f"(oracle threshold {f['cosine_oracle_macro_f1_2']:.3f})")
    inline = figures["inline_answers_with_examples"]
    out.print(f"{'inline':12s} answers to questions outside the bank, with the question's other answers as examples: "
              f"macro-F1 3-way / 2-way {inline['grouped_cv_macro_f1_3']:.3f} / {inline['grouped_cv_macro_f1_2']:.3f} "
              f"with the example head (grouped CV), {inline['without_head_macro_f1_3']:.3f} / "
              f"{inline['without_head_macro_f1_2']:.3f} without")
    dev = figures["dev_with_examples"]
    out.print(f"{'dev set':12s} with the question's other dev answers as examples, graded by the head fitted on the "
              f"three sets (not on it): macro-F1 3-way / 2-way {dev['head_macro_f1_3']:.3f} / "
              f"{dev['head_macro_f1_2']:.3f}, 2-way {dev['without_head_macro_f1_2']:.3f} without the head (the "
              "decision was fitted on these answers)")
    foreign = figures["foreign_head_recorded"]
    out.print("foreign head, no examples, correct-vs-not macro-F1 (recorded in app/grading/foreign.json; "
              "`python -m grading_lab.foreign_fit`): " + "; ".join(
                  f"{name} {foreign['grouped_cv'][name]:.3f} in grouped CV by question, "
                  f"{foreign['grouped_cv_by_module'][name]:.3f} by module, {foreign['others_fit'][name]:.3f} "
                  f"fitted on the other sets, {foreign['decision_alone'][name]:.3f} by the decision alone"
                  for name in foreign["grouped_cv"]))
    held = figures["pair_judge_held_out"]
    recorded = foreign_manifest["recipe"]["beetle_folds"]
    out.print(f"pair judge on ASAG questions held out of its training: {held}" if held else
              "pair judge: no held-out figures in its manifest; trainings of its recipe without one ASAG fold "
              "scored alone on that fold's questions: " + "; ".join(
                  f"`{r['judge']}`: {json.dumps(r['judge_alone_on_the_fold'])}" for r in recorded))


@appeals_app.command("list")
def appeals_list(
    status: Annotated[str, typer.Option(help="open, accepted, rejected or all")] = "open",
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Appeals with the answer and both verdicts."""
    from app.appeals.service import list_appeals

    runtime = Runtime.create(get_settings())
    with transaction(runtime.factory) as session:
        rows = list_appeals(session, None if status == "all" else status)
    if as_json:
        _print_json(rows)
        return
    table = Table("id", "question", "answer", "graded", "claimed", "status", "comment")
    for r in rows:
        table.add_row(r["id"], r["question_id"] or "", r["answer"] or "", r["original_verdict"], r["claimed_verdict"],
                      r["status"], r["comment"] or "")
    out.print(table)


def _resolve(appeal_id: str, accept: bool) -> None:
    from app.appeals.service import resolve
    from app.errors import TutorError

    runtime = Runtime.create(get_settings())
    try:
        with transaction(runtime.factory) as session:
            row = resolve(session, appeal_id, accept=accept)
    except TutorError as exc:
        err.print(f"[red]{exc.message}[/]")
        raise typer.Exit(1) from exc
    out.print(f"appeal {row['id']} {row['status']}")


@appeals_app.command("accept")
def appeals_accept(appeal_id: str) -> None:
    """Accept: the answer becomes a labelled example (with the claimed label) for its question."""
    _resolve(appeal_id, True)


@appeals_app.command("reject")
def appeals_reject(appeal_id: str) -> None:
    """Reject: the original verdict stands."""
    _resolve(appeal_id, False)
