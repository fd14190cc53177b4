"""The `tutor` command line: ingest, bank, search, serve."""

from __future__ import annotations

import errno
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from app.cli.keys import keys_app
from app.cli.learning import appeals_app, evaluate, grade
from app.cli.slack import slack_app
from app.config import Settings, get_settings
from app.db import transaction
from app.serving.runtime import Runtime
from worker.cli import worker_command

app = typer.Typer(help="GPU Tutor: a tutor for multi-GPU computing and distributed training.", no_args_is_help=True)
bank_app = typer.Typer(help="Inspect the question bank.", no_args_is_help=True)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
models_app = typer.Typer(help="The serving encoder and the grader's pair judge.", no_args_is_help=True)
app.add_typer(bank_app, name="bank")
app.add_typer(db_app, name="db")
app.add_typer(models_app, name="models")
app.add_typer(appeals_app, name="appeals")
app.command("grade")(grade)
app.command("eval")(evaluate)
app.add_typer(keys_app, name="keys")
app.command("worker")(worker_command)
app.add_typer(slack_app, name="slack")
err = Console(stderr=True)
out = Console()


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def _runtime(settings: Settings | None = None) -> Runtime:
    return Runtime.create(settings or get_settings())


# What a full disk looks like from each writer: the OS, SQLite, and FAISS's C++ writer.
_DISK_FULL = ("no space left on device", "database or disk is full", "disk i/o error", "disk quota exceeded")


def _stop_if_disk_full(exc: BaseException) -> None:
    """Exit 1 with a plain message when an ingestion failed for want of disk space; otherwise return.

    Ingestion writes the new index version to a temporary folder and commits the bank last, so a
    failure leaves the live bank and index as they were; the message says so instead of a traceback
    that names library source files and the server's paths."""
    seen: BaseException | None = exc
    while seen is not None:
        if (isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT)) or any(
            mark in str(seen).lower() for mark in _DISK_FULL
        ):
            err.print("[red]ingestion stopped: the disk is full (no space left for the index or the database). "
                      "The bank and index that were live are unchanged; free some space and run `tutor ingest` "
                      "again.[/]")
            raise typer.Exit(1) from None
        seen = seen.__cause__ or seen.__context__
    return


@app.command()
def ingest(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="files or folders; a .md file is a study note (default: data/raw and data/notes)"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Parse quiz documents and study notes into the bank and rebuild the vector index (only what changed)."""
    from app.answers.rubrics import embed_rubric_texts
    from ingest.embedder import model_id_for
    from ingest.pipeline import IngestConfig, run_ingest

    settings = get_settings()
    runtime = _runtime(settings)
    try:
        runtime.migrate()
    except Exception as exc:
        _stop_if_disk_full(exc)
        raise
    encoder_holder: list[Any] = []

    def encoder() -> Any:
        if not encoder_holder:
            # Ingestion embeds with the reference PyTorch model; the int8 export is for serving.
            from ingest.embedder import SentenceTransformerEncoder

            encoder_holder.append(SentenceTransformerEncoder(settings.model))
        return encoder_holder[0]

    config = IngestConfig(
        settings.index_path,
        settings.taxonomy_path,
        settings.annotations_path,
        settings.near_duplicate_threshold,
        precompute=embed_rubric_texts,
    )
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err,
        transient=True,
        disable=as_json,
    ) as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], completed=done, total=total)

        # The notes folder is read when there is one: a data folder without notes is still a bank.
        default = [settings.raw_path, *([settings.notes_path] if settings.notes_path.is_dir() else [])]
        try:
            summary = run_ingest(
                paths or default, runtime.factory, model_id_for(settings.model), encoder, config, progress
            )
        except Exception as exc:
            _stop_if_disk_full(exc)
            raise
        finally:
            runtime.close()
    if settings.export_onnx and summary.questions:
        try:
            _export(settings, force=False, quiet=as_json)
        except Exception as exc:
            _stop_if_disk_full(exc)
            raise
    if as_json:
        _print_json(summary.as_dict())
    else:
        _print_summary(summary.as_dict())
    if summary.skipped:
        raise typer.Exit(1)


def _print_summary(data: dict[str, Any]) -> None:
    out.print(
        f"[bold]{data['questions']}[/] questions: {data['added']} added, {data['updated']} updated, "
        f"{data['unchanged']} unchanged, {data['retired']} retired; {data['passages']} note passages: "
        f"{data['passages_added']} added, {data['passages_updated']} updated, {data['passages_retired']} retired; "
        f"{data['embedded']} texts embedded; index {data['index_version']}"
    )
    for doc in data["documents"]:
        what = f"{doc['passages']} passages" if "passages" in doc else f"{doc['questions']} questions"
        out.print(f"  {doc['file']}: {doc['layout'] or 'not used'}, {what}")
    for issue in data["skipped"]:
        err.print(f"[red]skipped[/] {issue['file']}:{issue['line']}: {issue['reason']}")
    for issue in data["ignored"]:
        err.print(f"[yellow]ignored[/] {issue['file']}:{issue['line']}: {issue['reason']}")


@bank_app.command("list")
def bank_list(
    topic: Annotated[str | None, typer.Option(help="only this topic")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="full items as JSON")] = False,
) -> None:
    """List the bank's questions."""
    from app.bank.repository import list_questions
    from app.bank.views import author_view

    runtime = _runtime()
    with transaction(runtime.factory) as session:
        rows, _ = list_questions(session, topic=topic)
        items = [author_view(r) for r in rows]
    if as_json:
        _print_json(items)
        return
    table = Table("id", "source", "topics", "question")
    for item in items:
        src = item["source"]
        table.add_row(item["id"], f"{src['file'][:3]} Q{src['number']}", ", ".join(item["topics"]), item["question"])
    out.print(table)


@bank_app.command("show")
def bank_show(question_id: str, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Show one question with its answers, options, explanation and notes."""
    from app.bank.repository import get_question
    from app.bank.views import author_view
    from app.errors import NotFoundError

    runtime = _runtime()
    try:
        with transaction(runtime.factory) as session:
            item = author_view(get_question(session, question_id, include_retired=True))
    except NotFoundError as exc:
        err.print(f"[red]{exc.message}[/]")
        raise typer.Exit(1) from exc
    if as_json:
        _print_json(item)
        return
    for key, value in item.items():
        out.print(f"[bold]{key}[/]: {value}")


@app.command()
def search(
    text: str,
    k: Annotated[int, typer.Option("-k", help="how many questions")] = 5,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Print the questions nearest to a text, with scores."""
    from app.bank.search import search as run_search

    runtime = _runtime()
    runtime.load()
    if runtime.problem:
        err.print(f"[red]{runtime.problem}[/]")
        raise typer.Exit(1)
    encoder, index = runtime.require()
    with transaction(runtime.factory) as session:
        hits = run_search(session, encoder, index, text, k)
        rows = [
            {
                "id": h.question.id,
                "score": round(h.score, 4),
                "matched": h.kind,
                "question": h.question.text,
                "file": h.question.document,
                "number": h.question.number,
            }
            for h in hits
        ]
    if as_json:
        _print_json(rows)
        return
    for row in rows:
        out.print(f"{row['score']:.3f}  {row['id']}  {row['question']}  [dim]({row['file']} Q{row['number']})[/]")


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="interface to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port")] = 8000,
) -> None:
    """Serve the tutor API."""
    import uvicorn

    from app.main import create_app
    from app.serving.accesslog import access_handler
    from app.serving.encoders import serving_encoder
    from app.serving.logqueue import log_off_the_loop, project_log_handlers

    # serving_encoder: the encoder app.cli.launch started building, if it did
    app = create_app(encoder_factory=serving_encoder, freeze_gc=True, access_log=True)
    # ws="none": the app has no WebSocket routes, so uvicorn need not import a WebSocket protocol.
    # access_log=False: the app logs each request after its response is sent (app.serving.accesslog).
    config = uvicorn.Config(app, host=host, port=port, log_level="info", ws="none", access_log=False)  # sets up logging
    project_log_handlers()
    access_handler(config.use_colors)
    listeners = log_off_the_loop()
    server = uvicorn.Server(config)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        for listener in listeners:
            listener.stop()
    if not server.started:  # e.g. the port is taken: exit non-zero, as uvicorn.run does
        raise typer.Exit(3)


def _export(settings: Settings, *, force: bool, quiet: bool) -> None:
    from app.serving.encoders import keep_states_model
    from ingest.onnx_export import export_encoder

    result = export_encoder(settings.model, settings.index_path, force=force)
    keep_states_model(settings, result.folder)
    if not quiet:
        verb = "exported" if result.exported else "up to date"
        err.print(f"int8 ONNX encoder {verb}: {result.folder} (cosine to PyTorch >= {result.min_cosine:.4f})")


@models_app.command("export")
def models_export(force: Annotated[bool, typer.Option(help="export again even if up to date")] = False) -> None:
    """Export the configured model to a fused, int8-quantised ONNX encoder beside the index."""
    settings = get_settings()
    _export(settings, force=force, quiet=False)


@models_app.command("train-judge")
def models_train_judge(
    epochs: Annotated[int | None, typer.Option(help="passes over the training pairs (default: the recipe's)")] = None,
    holdout: Annotated[int | None, typer.Option(
        help="leave out this fold (0-4, by question) of the ASAG pairs and report the judge on it")] = None,
    out: Annotated[Path | None, typer.Option(help="where to write the judge (default: models/judge/)")] = None,
    measure: Annotated[bool, typer.Option(help="first train without ASAG fold 0 and report on it")] = True,
    crossfit: Annotated[bool, typer.Option(
        help="instead, train the cross-fitted judges that the decision's fit reads its own answers with "
             "(with --late: the late judge's, for the bank decision)")] = False,
    layers: Annotated[int | None, typer.Option(
        help="keep only the base model's first N transformer layers (a cheaper judge, for comparison)")] = None,
    written_contrasts: Annotated[int, typer.Option(
        help="also train on a negation and a swap of each written right answer, this many times (for comparison)")]
        = 0,
    lead_ins: Annotated[int, typer.Option(
        help="dress this many of the bank's and the written pairs' passes with content-free openings (for "
             "comparison; grading_lab/contrasts.py: dress)")] = 0,
    random_stops: Annotated[bool, typer.Option(
        help="end each training answer with a full stop or not at random (for comparison; grading_lab/contrasts.py: "
             "restopped)")] = False,
    stops: Annotated[bool, typer.Option(
        "--stops", help="train on the answers with their final full stops as written, as judges before "
             "pair-judge-4 were (for comparison; the grader reads answers without them)")] = False,
    question: Annotated[bool, typer.Option(
        help="the judge reads the question after the accepted answer (--no-question: a shorter input, for comparison)")]
        = True,
    evasions: Annotated[bool, typer.Option(
        "--evasions", help="train on the bank's evasions too (for comparison; grading_lab/contrasts.py: "
             "evasion_pairs)")] = False,
    distil_from: Annotated[Path | None, typer.Option(
        help="distil from this trained judge's probabilities as well as the labels (for comparison)")] = None,
    distil: Annotated[float, typer.Option(help="with --distil-from: the teacher's share of the loss (0-1)")] = 0.5,
    late: Annotated[bool, typer.Option(
        help="the late judge (default: into models/late-judge/): the encoder's own states, joined only in the "
             "last layers (grading_lab/late_judge.py)")]
        = False,
) -> None:
    """Rebuild the grader's judge from data in the repository, with a fixed seed."""
    from dataclasses import replace

    from app.config import LATE_JUDGE_DIR, PROJECT_ROOT
    from app.grading.pairjudge import MANIFEST, read_judge_manifest
    from grading_lab.judge_train import (
        CROSSFIT_DIR,
        CROSSFIT_FOLDS,
        JUDGE_DIR,
        LATE_CROSSFIT_DIR,
        LATE_RECIPE,
        Recipe,
        recipe_of,
        train_judge,
    )

    # Options that make another judge than the shipped one's recipe (such a judge needs --out), and the others.
    other_recipe = {"--holdout": holdout is not None, "--layers": layers is not None,
                    "--written-contrasts": written_contrasts != 0, "--lead-ins": lead_ins != 0,
                    "--random-stops": random_stops, "--stops": stops,
                    "--no-question": not question, "--evasions": evasions,
                    "--distil-from": distil_from is not None, "--late": late}
    run = {"--epochs": epochs is not None, "--out": out is not None, "--no-measure": not measure}
    if crossfit:
        # Made like the shipped judge, whatever its recipe (the decision's fit refuses others): an option that
        # would change the recipe, or where the judges go, is refused rather than passed over.
        given = [name for name, changed in {**other_recipe, **run}.items() if changed and name != "--late"]
        folds_dir, shipped_dir = (LATE_CROSSFIT_DIR, LATE_JUDGE_DIR) if late else (CROSSFIT_DIR, JUDGE_DIR)
        if given:
            err.print(f"[red]--crossfit trains the fold judges with the shipped judge's recipe into {folds_dir}; "
                      f"it takes no {', '.join(given)}[/]")
            raise typer.Exit(2)
        shipped = recipe_of(read_judge_manifest(shipped_dir))
        for fold in range(CROSSFIT_FOLDS):
            target = folds_dir / f"fold-{fold}"
            train_judge(target, replace(shipped, crossfit=fold), log=err.print, measure=False)
            typer.echo(f"cross-fitted judge {fold} written to {target}")
        bank = " --bank" if late else ""
        typer.echo(f"now fit the decision: python -m grading_lab.decision_fit{bank} --write")
        return
    recipe = replace(Recipe(), holdout=holdout, layers=layers, written_contrasts_repeat=written_contrasts,
                     question=question, lead_ins=lead_ins, random_stops=random_stops,
                     no_stops=not (stops or random_stops), evasions=evasions)
    if distil_from is not None:
        teacher = distil_from.resolve()
        if not 0 < distil <= 1 or not teacher.is_relative_to(PROJECT_ROOT) or not (teacher / MANIFEST).is_file():
            err.print("[red]--distil-from names a judge folder inside the project, and --distil is in (0, 1][/]")
            raise typer.Exit(2)
        recipe = replace(recipe, distil=distil, teacher=str(teacher.relative_to(PROJECT_ROOT)))
    if epochs is not None:
        recipe = replace(recipe, epochs=epochs)
    if late:
        given = [name for name, changed in other_recipe.items()
                 if changed and name not in ("--late", "--holdout", "--stops", "--evasions")]
        if given:
            err.print(f"[red]--late trains the late judge's recipe; it takes no {', '.join(given)}[/]")
            raise typer.Exit(2)
        recipe = replace(LATE_RECIPE, epochs=epochs or LATE_RECIPE.epochs, holdout=holdout, no_stops=not stops,
                         evasions=evasions)
    if any(changed for name, changed in other_recipe.items() if name != "--late") and out is None:
        err.print("[red]a held-out, shallower, other-input or other-data run needs --out: not the shipped judge[/]")
        raise typer.Exit(2)
    target = out or (LATE_JUDGE_DIR if late else JUDGE_DIR)
    manifest = train_judge(target, recipe, log=err.print, measure=measure)
    kind = "late" if late else "pair"
    out_line = (f"{kind} judge written to {target}: {manifest['pairs']['total']} pairs, int8 agrees with PyTorch on "
                f"{manifest['int8_vs_pytorch']['same_label']:.1%} of a check sample")
    if "asag_heldout" in manifest:
        out_line += f"; held out: {json.dumps(manifest['asag_heldout'])}"
    typer.echo(out_line)


@models_app.command("fit-ask")
def models_fit_ask(
    write: Annotated[bool, typer.Option("--write", help="write models/ask/relevance.json")] = False,
) -> None:
    """Fit the ask path's relevance head on data/train/ask_dev.jsonl: grouped cross-validation by topic,
    and with --write the head and its manifest. The frozen data/eval/ask.jsonl is never read."""
    from app.db import transaction
    from grading_lab.ask_eval import load_items, observe
    from grading_lab.ask_fit import TUNING_SET, fit_and_report

    runtime = _runtime()
    runtime.load(ask_head=False)
    if runtime.problem:
        err.print(f"[red]{runtime.problem}[/]")
        raise typer.Exit(1)
    items = load_items(TUNING_SET)
    encoder, index = runtime.require()
    with transaction(runtime.factory) as session:
        observations = observe(session, encoder, index, items)
    report = fit_and_report(observations, items, index.version, write)
    typer.echo(json.dumps({k: {m: v for m, v in r.items() if m != "by_group"} for k, r in report.items()}, indent=2))


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Apply schema migrations."""
    runtime = _runtime()
    runtime.migrate()
    out.print("schema is up to date")


if __name__ == "__main__":
    app()
