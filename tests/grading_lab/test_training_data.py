"""The grader's written training answers: well formed, about the bank's questions, and apart from the
evaluation sets (no answer of an evaluation set is trained on word for word); the cross-fitting folds
and the check that a fold judge was made like the shipped one."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, replace
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from typer.testing import CliRunner

from app.cli.main import app
from app.config import DATA_DIR
from app.grading.decision import DECISION_PATH
from app.grading.judges import Judge, default_judge
from grading_lab.contrasts import written_contrasts
from grading_lab.decision_fit import made_as
from grading_lab.evaluation import bank_items
from grading_lab.judge_train import (
    BANK_ANSWERS,
    CROSSFIT_FOLDS,
    DECISION_ANSWERS,
    Recipe,
    answer_pairs,
    crossfit_fold,
    recipe_of,
)
from tests.conftest import normalised

LABELS = {"correct", "partial", "incorrect"}
EVAL_SETS = tuple(DATA_DIR / "eval" / f"{name}.jsonl"
                  for name in ("dev", "blind", "roles", "evasive", "swaps", "swaps_more"))
# Written answers that no shipped model is trained on yet (data/train/README.md).
WRITTEN_ONLY = tuple(sorted((DATA_DIR / "train").glob("written_answers_*.jsonl")))
# Every file of written training answers, whatever reads it.
TRAINING_FILES = (BANK_ANSWERS, *DECISION_ANSWERS, *WRITTEN_ONLY)


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]



def _bank_keys() -> set[tuple[str, int]]:
    return set(bank_items())


def test_the_decision_answers_are_there() -> None:
    assert len(DECISION_ANSWERS) == 3
    assert sum(len(_rows(p)) for p in DECISION_ANSWERS) == 661


@pytest.mark.parametrize("path", TRAINING_FILES, ids=lambda p: p.name)
def test_training_answers_are_well_formed(path: Path) -> None:
    keys = _bank_keys()
    assert len(keys) == 42
    rows = _rows(path)
    assert rows
    for row in rows:
        assert row["label"] in LABELS, row
        assert (row["file"], row["number"]) in keys, row
        assert str(row["answer"]).strip(), row
    texts = Counter(normalised(r["answer"]) for r in rows)
    assert texts.most_common(1)[0][1] == 1, texts.most_common(1)


def test_no_evaluation_answer_is_trained_on() -> None:
    evaluation = {normalised(r["answer"]) for path in EVAL_SETS for r in _rows(path)}
    for path in TRAINING_FILES:
        leaked = [r["answer"] for r in _rows(path) if normalised(r["answer"]) in evaluation]
        assert not leaked, (path.name, leaked[:3])


def test_no_answer_stands_in_two_training_files() -> None:
    """An answer copied into a second file would be trained on twice as often as its neighbours,
    and a file's own figures in the decision's fit would then read answers another file taught."""
    where: dict[str, str] = {}
    repeated = []
    for path in TRAINING_FILES:
        for row in _rows(path):
            text = normalised(row["answer"])
            if where.setdefault(text, path.name) != path.name:
                repeated.append((where[text], path.name, row["answer"]))
    assert not repeated, repeated[:3]


def test_no_evaluation_answer_is_made_from_a_training_answer() -> None:
    """The negations and swaps made from the written right answers (written_contrasts) are no
    evaluation answer either."""
    items = bank_items()
    written = answer_pairs(items)
    for path in DECISION_ANSWERS:
        written += answer_pairs(items, path)
    made = written_contrasts(written)
    assert len(made) > 500
    assert {p.label for p in made} == {"incorrect"}
    evaluation = {normalised(r["answer"]) for path in EVAL_SETS for r in _rows(path)}
    leaked = [p.answer for p in made if normalised(p.answer) in evaluation]
    assert not leaked, leaked[:3]


def test_every_crossfit_fold_holds_questions() -> None:
    folds = Counter(crossfit_fold(f, n) for f, n in _bank_keys())
    assert sorted(folds) == list(range(CROSSFIT_FOLDS))
    assert min(folds.values()) >= 10


def test_a_fold_judge_made_with_a_newer_recipe_field_at_its_default_is_made_like_the_shipped_one() -> None:
    """The shipped judge's manifest predates recipe fields such as `layers` and
    `written_contrasts_repeat`; fold judges trained now record them at their defaults, and the
    decision's fit must still accept them (and refuse one made with another value)."""
    shipped = default_judge()
    fold = SimpleNamespace(manifest={**shipped.manifest, "recipe": {
        **asdict(Recipe()), **shipped.manifest["recipe"], "crossfit": 0}})
    assert made_as(cast(Judge, fold)) == made_as(shipped)
    recipe = {**fold.manifest["recipe"], "written_contrasts_repeat": 2}
    other = SimpleNamespace(manifest={**fold.manifest, "recipe": recipe})
    assert made_as(cast(Judge, other)) != made_as(shipped)


def test_the_recipe_read_back_from_the_shipped_judges_manifest_is_the_one_it_was_made_with() -> None:
    """`tutor models train-judge --crossfit` trains the fold judges from this: made like the shipped judge."""
    shipped = default_judge()
    recipe = recipe_of(shipped.manifest)
    assert {**asdict(recipe), "asag": list(recipe.asag)} == {
        **asdict(Recipe()), **shipped.manifest["recipe"]}
    written = json.loads(json.dumps(asdict(replace(recipe, crossfit=0))))  # as the fold judge's manifest holds it
    fold = SimpleNamespace(manifest={**shipped.manifest, "recipe": written})
    assert made_as(cast(Judge, fold)) == made_as(shipped)
    other = recipe_of({"recipe": {**shipped.manifest["recipe"], "question": False}})
    assert not other.question
    with pytest.raises(ValueError, match="does not know"):
        recipe_of({"recipe": {**shipped.manifest["recipe"], "dropout_of_the_future": 0.3}})
    older = {k: v for k, v in shipped.manifest["recipe"].items() if k != "no_stops"}
    assert not recipe_of({"recipe": older}).no_stops  # a judge from before the option read final stops
    older = {k: v for k, v in shipped.manifest["recipe"].items() if k != "evasions"}
    assert not recipe_of({"recipe": older}).evasions  # nor was it trained on the bank's evasions


@pytest.mark.parametrize("option", [["--layers", "3"], ["--no-question"], ["--written-contrasts", "1"],
                                    ["--lead-ins", "1"], ["--epochs", "1"], ["--holdout", "0"], ["--out", "elsewhere"],
                                    ["--distil-from", "models/judge"], ["--evasions"]])
def test_crossfit_refuses_an_option_it_would_not_follow(option: list[str], tmp_path: Path) -> None:
    """The fold judges are made with the shipped judge's recipe: an option that would change it is an error
    named in the message, before any training starts, not an option silently passed over."""
    result = CliRunner().invoke(app, ["models", "train-judge", "--crossfit", *option], env={"HOME": str(tmp_path)})
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert option[0] in said and "shipped judge's recipe" in said


@pytest.mark.parametrize("option", [["--epochs", "1"], ["--out", "elsewhere"], ["--holdout", "1"]])
def test_the_late_judges_crossfit_refuses_an_option_it_would_not_follow(option: list[str], tmp_path: Path) -> None:
    """`--crossfit --late` makes the late judge's fold judges, for the bank decision, with its recipe."""
    result = CliRunner().invoke(app, ["models", "train-judge", "--crossfit", "--late", *option],
                                env={"HOME": str(tmp_path)})
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert option[0] in said and "late-crossfit" in said and "--late" not in said.split("no ")[-1]


def test_the_shipped_pair_judges_recipe_is_the_default_recipe() -> None:
    """`tutor models train-judge` rebuilds models/judge/ with Recipe(), as its manifest records."""
    assert recipe_of(default_judge().manifest) == Recipe()


def test_the_shipped_late_judges_recipe_is_the_late_recipe() -> None:
    """`tutor models train-judge --late` rebuilds models/late-judge/ with LATE_RECIPE, as its manifest records."""
    from app.config import LATE_JUDGE_DIR
    from app.grading.latejudge import read_late_manifest
    from grading_lab.judge_train import LATE_RECIPE

    manifest = read_late_manifest(LATE_JUDGE_DIR)
    assert recipe_of(manifest) == LATE_RECIPE
    assert manifest["data"] == default_judge().manifest["data"]  # the pair judge's training data


def test_the_shipped_judges_were_trained_on_the_repositorys_data_as_it_is() -> None:
    """Each manifest hashes the files its training read: the seeds, the annotations (accepted answers the
    judges read as the reference), the written answers, the ASAG splits. A change to any of them (a new
    accepted answer, a relabelled answer) calls for the judges to be trained again, or `tutor models
    train-judge` would no longer rebuild what is served."""
    from app.config import LATE_JUDGE_DIR
    from app.grading.latejudge import read_late_manifest
    from grading_lab.judge_train import data_hashes

    for manifest in (default_judge().manifest, read_late_manifest(LATE_JUDGE_DIR)):
        recorded, now = manifest["data"], data_hashes(recipe_of(manifest))
        assert recorded == now, sorted(name for name in {*recorded, *now} if recorded.get(name) != now.get(name))


def test_distillation_loss_is_zero_only_where_the_student_reads_as_the_teacher() -> None:
    import torch

    from grading_lab.judge_train import distillation_loss

    teacher = torch.log(torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]]))
    assert float(distillation_loss(teacher + 3.0, teacher)) == pytest.approx(0.0, abs=1e-6)  # logits shift freely
    wrong = float(distillation_loss(teacher.flip(1), teacher))
    nearer = float(distillation_loss(0.5 * teacher.flip(1) + 0.5 * teacher, teacher))
    assert wrong > nearer > 0


@pytest.mark.parametrize("args", [["--distil-from", "/tmp"], ["--distil-from", "models/judge", "--distil", "1.5"],
                                  ["--distil-from", "models/judge"]])
def test_a_distilled_judge_needs_a_teacher_in_the_project_a_share_and_its_own_folder(
        args: list[str], tmp_path: Path) -> None:
    """A teacher outside the project could not be rebuilt from the repository; a distilled judge is
    for comparison, so it is never written over the shipped one."""
    result = CliRunner().invoke(app, ["models", "train-judge", *args], env={"HOME": str(tmp_path)})
    assert result.exit_code == 2, result.output


def test_the_written_only_answers_train_nothing_yet() -> None:
    """No shipped model reads them: the judge's manifest hashes none of them, and they are neither
    judge nor decision training files."""
    data = json.dumps(default_judge().manifest["data"])
    fitted_on = json.loads(DECISION_PATH.read_text(encoding="utf-8"))["fitted_on"]
    assert [p.name for p in WRITTEN_ONLY] == ["written_answers_d.jsonl", "written_answers_e.jsonl",
                                              "written_answers_f.jsonl", "written_answers_g.jsonl"]
    for path in WRITTEN_ONLY:
        assert not any(f.endswith(path.name) for f in fitted_on)
        assert path not in DECISION_ANSWERS and path != BANK_ANSWERS
        assert path.name not in data


def test_dressed_answers_keep_their_labels_and_carry_an_opening_or_a_closing() -> None:
    """The judges see content-free openings on wrong answers as often as on right ones, so that no
    opening is a sign of a right answer (docs/GRADING.md, "Lead-ins")."""
    from grading_lab.contrasts import CLOSINGS, OPENINGS, Pair, dressed

    plain = [Pair("q", "ref", answer, label, "k", "g") for answer, label in [
        ("DDP splits the data.", "correct"), ("NCCL sends nothing over NVLink", "incorrect"),
        ("it overlaps the all-reduce with the backward pass", "partial")] * 40]
    made = dressed(plain, seed=3)
    assert [(p.label, p.kind, p.group) for p in made] == [(p.label, p.kind, p.group) for p in plain]
    for before, after in zip(plain, made, strict=True):
        opened = any(after.answer.startswith(o) for o in OPENINGS)
        closed = any(after.answer.endswith(c) for c in CLOSINGS)
        assert opened != closed, after.answer
        assert before.answer.rstrip(".").lower().split()[-1] in after.answer.lower()
    assert "NCCL sends" in " ".join(p.answer for p in made)  # an acronym keeps its case after an opening
    assert {p.label for p in made if any(p.answer.startswith(o) for o in OPENINGS)} == LABELS
    assert dressed(plain, seed=3) == made


def test_a_recipe_with_lead_ins_dresses_one_pass_and_trains_on_as_many_pairs() -> None:
    from grading_lab.judge_train import training_pairs

    with_lead_ins, without = training_pairs(Recipe(lead_ins=1)), training_pairs(Recipe())
    assert len(with_lead_ins) == len(without)
    assert Counter(p.label for p in with_lead_ins) == Counter(p.label for p in without)
    plain = {q.answer for q in without}
    new = Counter(p.label for p in with_lead_ins if p.answer not in plain)
    assert new["incorrect"] > 500 and new["correct"] > 500


def test_the_lead_in_probe_reads_openings_no_judge_was_shown_and_no_check_cuts() -> None:
    """A figure on openings the judges were trained with, or that strip_lead_in removes, says little."""
    from app.grading.checks import strip_lead_in
    from grading_lab.contrasts import CLOSINGS, OPENINGS
    from grading_lab.lead_in_probe import PROBE_CLOSINGS, PROBE_OPENINGS, dress

    def words(texts: tuple[str, ...]) -> set[str]:
        return {w for t in texts for w in t.lower().replace(",", " ").replace(":", " ").split()}

    content_free = {"i", "i'm", "is", "it", "me", "my", "to", "be", "as", "if", "the", "that", "this", "so", "let"}
    assert not (words(PROBE_OPENINGS + PROBE_CLOSINGS) & words(OPENINGS + CLOSINGS)) - content_free
    answer = "Each rank keeps one shard of the optimizer state."
    for opening in PROBE_OPENINGS:
        dressed = dress(answer, opening, "")
        assert strip_lead_in(dressed) == dressed
        assert dressed.endswith("ach rank keeps one shard of the optimizer state.")
    for closing in PROBE_CLOSINGS:
        assert dress(answer, "", closing) == answer + closing


def test_the_held_out_lead_ins_share_no_word_with_the_other_lists() -> None:
    """The held-out openings and closings report on rules designed without them: none of their words
    (beyond function words) is in the training lists, the probe's lists or the lead-ins cut by name."""
    from app.grading.checks import strip_lead_in
    from grading_lab.contrasts import CLOSINGS, OPENINGS
    from grading_lab.lead_in_probe import (
        HELD_OUT_CLOSINGS,
        HELD_OUT_OPENINGS,
        PROBE_CLOSINGS,
        PROBE_OPENINGS,
        dress,
        dressings,
    )

    def words(texts: tuple[str, ...]) -> set[str]:
        return {w.strip(",:.!—") for t in texts for w in t.lower().split()} - {""}

    function_words = {"i", "i'm", "my", "me", "the", "of", "that", "so", "it", "from", "or", "on", "to"}
    held_out = words(HELD_OUT_OPENINGS + HELD_OUT_CLOSINGS)
    assert not (held_out & words(OPENINGS + CLOSINGS + PROBE_OPENINGS + PROBE_CLOSINGS)) - function_words
    answer = "Each rank keeps one shard of the optimizer state."
    for opening in HELD_OUT_OPENINGS:
        assert strip_lead_in(dress(answer, opening, "")) == dress(answer, opening, "")
    assert len(dressings(held_out=True)) == 1 + len(HELD_OUT_OPENINGS) + len(HELD_OUT_CLOSINGS)


def test_random_stops_leave_no_label_with_the_final_full_stop() -> None:
    """The bank's answers end without a full stop and most written ones with one (docs/GRADING_LOG.md,
    "Final full stops"): with `random_stops` every label ends in one about half the time, and nothing else changes."""
    from collections import Counter

    from grading_lab.contrasts import Pair, restopped
    from grading_lab.judge_train import Recipe, training_pairs

    plain, stopped = training_pairs(Recipe(no_stops=False)), training_pairs(Recipe(random_stops=True))
    assert len(plain) == len(stopped)
    assert all(p.label == q.label and p.answer.rstrip(". ") == q.answer.rstrip(". ")
               for p, q in zip(plain, stopped, strict=True))
    ends = Counter((q.label, q.answer.endswith(".")) for q in stopped)
    for label in ("correct", "partial", "incorrect"):
        assert 0.4 < ends[(label, True)] / (ends[(label, True)] + ends[(label, False)]) < 0.6
    asked = [Pair("q", "r", "Is it?", "correct", "k", "g"), Pair("q", "r", "...", "incorrect", "k", "g")]
    assert [p.answer for p in restopped(asked, 0)] == ["Is it?", "..."]  # a question mark stays; nothing left: kept


def test_no_stops_leave_no_training_answer_with_a_final_full_stop() -> None:
    """A judge is trained as the grader reads answers (app/grading/grader.py: _precheck): with `no_stops`,
    the shipped recipe's, no answer ends in a full stop, and nothing else changes."""
    from grading_lab.contrasts import Pair, destopped
    from grading_lab.judge_train import Recipe, training_pairs

    assert Recipe().no_stops
    plain, bare = training_pairs(Recipe(no_stops=False)), training_pairs(Recipe())
    assert len(plain) == len(bare)
    assert any(p.answer.endswith(".") for p in plain)
    assert all(p.label == q.label and p.answer.rstrip(". ") == q.answer.rstrip(". ") and not q.answer.endswith(".")
               for p, q in zip(plain, bare, strict=True) if p.answer.strip(". "))
    kept = [Pair("q", "r", "Is it?", "correct", "k", "g"), Pair("q", "r", "...", "incorrect", "k", "g"),
            Pair("q", "r", "It splits it. Then sums.", "correct", "k", "g")]
    assert [p.answer for p in destopped(kept)] == ["Is it?", "...", "It splits it. Then sums"]


@pytest.mark.parametrize(("args", "said"), [(["--evasions"], "needs --out"), (["--late", "--evasions"], "needs --out"),
                                           (["--late", "--layers", "3"], "takes no --layers")])
def test_a_judge_of_another_recipe_is_never_written_over_a_shipped_one(args: list[str], said: str,
                                                                       tmp_path: Path) -> None:
    """A recipe option is for comparison: without --out, the run is refused before any training starts
    (and --late refuses the options its recipe has no use for)."""
    result = CliRunner().invoke(app, ["models", "train-judge", *args], env={"HOME": str(tmp_path)})
    assert result.exit_code == 2, result.output
    assert said in " ".join(result.output.split())
