"""Fit the grader's learned decision on the dev set:
`python -m grading_lab.decision_fit [--bank] [--write]`, or `... --record`.

The decision (app/grading/decision.py) weighs the similarity evidence, the checks and the pair
judge. It is fitted on the labelled dev set, whose answers the judge never saw; its figures are
cross-validated with folds grouped by question (a question's answers are all in one fold), so a
figure never comes from a question the fit has seen. The blind set is not read here.

With --bank, the bank decision instead (app/grading/decision.py: BANK_FEATURES): the same rows and
inputs with the late judge's reading as well, each answer read by a late judge that never saw it (the
shipped one for the dev set, the cross-fitted late judges of `tutor models train-judge --crossfit --late`
for the decision's written answers), written to bank_decision.json.

The cross-fitted judges are slow to train on 2 cores (about 17 minutes each, one at a time) and are not
shipped. `--record` writes the readings of those present into data/train/readings/
(grading_lab/readings.py), one judge at a time; a fit without a judge's folder replays its recording, so a
change to the checks, the inputs or the rules is refitted in minutes.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from app.grading import Graders, Rubric, plan_many
from app.grading.decision import (
    BANK_DECISION_PATH,
    BANK_FEATURES,
    DECISION_PATH,
    FEATURES,
    VERDICTS,
    Decision,
    load_decision,
)
from app.grading.grader import BANK_GRADER, DECISION_GRADER, Judged, bank_input, decide, decision_input, vetoed
from app.grading.judges import Judge, default_judge, load_judge, offline_late_judge
from app.grading.pairjudge import MANIFEST
from grading_lab import readings
from grading_lab.evaluation import DATA_DIR, MemoEncoder, bank_rubrics
from grading_lab.judge_train import (
    CROSSFIT_DIR,
    CROSSFIT_FOLDS,
    DECISION_ANSWERS,
    LATE_CROSSFIT_DIR,
    crossfit_fold,
    recipe_of,
)
from grading_lab.logreg import fit_softmax, macro_f1, standardiser
from ingest.embedder import Encoder

L2 = 1.0
FOLDS = 7
SEED = 13


@dataclass
class Dataset:
    """Decision features of the labelled answers the checks leave open, with labels and groups."""

    x: np.ndarray
    y: np.ndarray  # index into VERDICTS
    groups: list[str]  # the question of each row
    kinds: list[str]
    fixed: list[tuple[str, str, str]]  # (label, verdict, kind) of answers the checks settle alone
    cases: list[tuple[Rubric, str, Judged]]  # what `decide` needs of each row
    learn: np.ndarray  # rows the decision weighs (the rest a sure check or a labelled example settles)
    sources: list[str]  # the file of each row
    fixed_sources: list[str]  # the file of each answer in `fixed`
    xb: np.ndarray | None = None  # the bank decision's features, when the late judge read every row


def dataset(path: Path, encoder: Encoder, graders: Graders | None = None,
            keep: Callable[[dict[str, Any]], bool] | None = None,
            rubrics: dict[tuple[str, int], Rubric] | None = None) -> Dataset:
    """Every labelled answer of a file (those `keep` accepts, if given), as the decision sees it.
    `rubrics`: the bank's (`bank_rubrics`), when the caller reads several files."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if keep is None or keep(r)]
    memo = MemoEncoder(encoder)
    rubrics = rubrics if rubrics is not None else bank_rubrics(memo)
    plan = plan_many([rubrics[(r["file"], int(r["number"]))] for r in rows], [r["answer"] for r in rows])
    vecs = memo.encode(plan.texts) if plan.texts else np.zeros((0, encoder.dim), dtype=np.float32)
    judged = plan.evidence(vecs, graders)
    x = np.array([decision_input(ev, on_refs, on_wrongs) for ev, on_refs, on_wrongs in judged])
    xb = (np.array([bank_input(row, ev) for row, (ev, _, _) in zip(x, judged, strict=True)])
          if judged and all(ev.late is not None for ev, _, _ in judged) else None)
    todo = plan.todo
    cases = [(plan.rubrics[i], text, j) for i, text, j in zip(todo, plan.texts, judged, strict=True)]
    learn = np.array([not vetoed(ev) and ev.adopted is None for ev, _, _ in judged])
    y = np.array([VERDICTS.index(rows[i]["label"]) for i in todo])
    fixed = [(r["label"], p.result.verdict, r.get("kind", "?")) for r, p in zip(rows, plan.pendings, strict=True)
             if p.result is not None]
    return Dataset(x, y, [f"{rows[i]['file']}#{rows[i]['number']}" for i in todo],
                   [rows[i].get("kind", "?") for i in todo], fixed, cases, learn,
                   [path.name] * len(todo), [path.name] * len(fixed), xb)


def concat(parts: list[Dataset]) -> Dataset:
    """Several files' rows as one dataset (folds still group every file's answers by question)."""
    xbs = [d.xb for d in parts]
    return Dataset(np.concatenate([d.x for d in parts]), np.concatenate([d.y for d in parts]),
                   [g for d in parts for g in d.groups], [k for d in parts for k in d.kinds],
                   [f for d in parts for f in d.fixed], [c for d in parts for c in d.cases],
                   np.concatenate([d.learn for d in parts]), [s for d in parts for s in d.sources],
                   [s for d in parts for s in d.fixed_sources],
                   np.concatenate(xbs) if all(xb is not None for xb in xbs) else None)  # type: ignore[arg-type]


def fit(x: np.ndarray, y: np.ndarray, version: str, l2: float = L2, bank: bool = False) -> Decision:
    """The decision (`bank`: the bank decision) fitted on these rows (balanced classes, L2 on
    standardised features)."""
    mean, scale = standardiser(x)
    weights, bias = fit_softmax((x - mean) / scale, y, len(VERDICTS), l2=l2)
    return Decision(mean, scale, weights, bias, version, BANK_FEATURES if bank else FEATURES)


def bank_rows(data: Dataset) -> np.ndarray:
    """The bank decision's features of every row; refuses rows the late judge did not read."""
    if data.xb is None:
        raise SystemExit("the bank decision's rows need the late judge's readings (`labelled(..., bank=True)`)")
    return data.xb


def _folds(groups: list[str], folds: int, seed: int) -> np.ndarray:
    names = sorted(set(groups))
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(names))
    fold_of = {names[j]: k % folds for k, j in enumerate(order)}
    return np.array([fold_of[g] for g in groups])


def crossval(data: Dataset, folds: int = FOLDS, seed: int = SEED, l2: float = L2, bank: bool = False
             ) -> dict[str, Any]:
    """Macro-F1 (3-way and correct-vs-not) and accuracy per kind, folds grouped by question: over
    every row, and over each file's rows apart (`by_file`) when there are several. `bank`: of the bank
    decision (the late judge's readings as well)."""
    fold = _folds(data.groups, folds, seed)
    pred = [""] * len(data.y)
    x = bank_rows(data) if bank else data.x
    for k in range(folds):
        train = (fold != k) & data.learn
        decision = fit(x[train], data.y[train], "cv", l2, bank)
        for i in np.where(fold == k)[0]:
            rubric, text, (ev, on_refs, on_wrongs) = data.cases[i]
            pred[i] = (decide(rubric, text, ev, on_refs, on_wrongs, load_decision(), bank=decision) if bank
                       else decide(rubric, text, ev, on_refs, on_wrongs, decision)).verdict
    truth = [VERDICTS[i] for i in data.y]
    out = report(truth, pred, data.kinds, data.fixed)
    names = sorted(set(data.sources) | set(data.fixed_sources))
    if len(names) > 1:
        out["by_file"] = {}
        for name in names:
            rows = [i for i, s in enumerate(data.sources) if s == name]
            fixed = [f for f, s in zip(data.fixed, data.fixed_sources, strict=True) if s == name]
            out["by_file"][name] = report([truth[i] for i in rows], [pred[i] for i in rows],
                                          [data.kinds[i] for i in rows], fixed)
    return out


def report(truth: list[str], pred: list[str], kinds: list[str], fixed: list[tuple[str, str, str]]) -> dict[str, Any]:
    """The figures over the open answers and the ones the checks settle, together."""
    truth = truth + [t for t, _, _ in fixed]
    pred = pred + [p for _, p, _ in fixed]
    kinds = kinds + [k for _, _, k in fixed]
    two = lambda labels: ["correct" if v == "correct" else "not" for v in labels]  # noqa: E731
    per_kind: dict[str, list[bool]] = defaultdict(list)
    for t, p, k in zip(truth, pred, kinds, strict=True):
        per_kind[k].append(t == p)
    return {
        "n": len(truth),
        "macro_f1_3": round(macro_f1(truth, pred, list(VERDICTS)), 4),
        "macro_f1_2": round(macro_f1(two(truth), two(pred), ["correct", "not"]), 4),
        "per_kind": {k: round(float(np.mean(v)), 3) for k, v in sorted(per_kind.items())},
    }


DEFAULT_FILES = (DATA_DIR / "eval" / "dev.jsonl", *DECISION_ANSWERS)


def labelled(files: list[Path], encoder: Encoder, bank: bool = False) -> Dataset:
    """The files' answers as the decision sees them. The shipped judge never trained on the dev set,
    but it did on the decision's written answers (DECISION_ANSWERS): those are read by the
    cross-fitted judges (`tutor models train-judge --crossfit`), each on the fold of questions whose
    answers it was trained without, so that every row shows the judge as it reads an unseen answer.
    `bank`: each row read by the late judge too, the written answers by the cross-fitted late judges
    (`tutor models train-judge --crossfit --late`). Without the judges' folders, their readings recorded
    in data/train/readings/ are replayed (`record`, grading_lab/readings.py)."""
    trained_on = {p.name for p in DECISION_ANSWERS} if default_judge().manifest["recipe"].get(
        "decision_answers") else set()
    shipped_late = offline_late_judge() if bank else None
    rubrics = bank_rubrics(encoder)  # built once for every file and fold
    folds: dict[str, Judge] = {}
    if trained_on & {p.name for p in files}:
        for k in range(CROSSFIT_FOLDS):
            folds[f"crossfit-pair-{k}"] = fold_judge(CROSSFIT_DIR, k, default_judge(), "")
            if shipped_late is not None:
                folds[f"crossfit-late-{k}"] = fold_judge(LATE_CROSSFIT_DIR, k, shipped_late, " --late")
    parts = []
    for path in files:
        if path.name not in trained_on:
            parts.append(dataset(path, encoder, Graders(late=shipped_late, no_late=not bank), rubrics=rubrics))
            continue
        for k in range(CROSSFIT_FOLDS):
            graders = Graders(judge=folds[f"crossfit-pair-{k}"], late=folds.get(f"crossfit-late-{k}"),
                              no_late=not bank)
            parts.append(dataset(path, encoder, graders, keep=partial(_in_fold, k), rubrics=rubrics))
    return concat(parts)


def record(encoder: Encoder) -> list[Path]:
    """Record the readings of every cross-fitted judge whose folder is here, each on the decision answers of
    its fold, into data/train/readings/ (grading_lab/readings.py); the paths written. Each judge is
    recorded alone, so the slow trainings can be spread over several runs. A late judge reads what its
    fold's pair judge leads it to (the wrong option that judge nominates), so it needs that pair judge,
    live or recorded."""
    rubrics = bank_rubrics(encoder)
    written: list[Path] = []
    for k in range(CROSSFIT_FOLDS):
        live_pair = (CROSSFIT_DIR / f"fold-{k}" / MANIFEST).is_file()
        live_late = (LATE_CROSSFIT_DIR / f"fold-{k}" / MANIFEST).is_file()
        if live_pair:  # read as the decision's fit reads it (the bank decision's fit asks it the same)
            pair = fold_judge(CROSSFIT_DIR, k, default_judge(), "", record=True)
            for path in DECISION_ANSWERS:
                dataset(path, encoder, Graders(judge=pair, no_late=True), keep=partial(_in_fold, k), rubrics=rubrics)
            written += readings.save_all({f"crossfit-pair-{k}": pair})
        if live_late:
            pair = fold_judge(CROSSFIT_DIR, k, default_judge(), "")
            late = fold_judge(LATE_CROSSFIT_DIR, k, offline_late_judge(), " --late", record=True)
            for path in DECISION_ANSWERS:
                dataset(path, encoder, Graders(judge=pair, late=late), keep=partial(_in_fold, k), rubrics=rubrics)
            written += readings.save_all({f"crossfit-late-{k}": late}, encoder_sha256())
    return written


def fold_judge(where: Path, fold: int, shipped: Judge, option: str, record: bool = False) -> Judge:
    """The cross-fitted judge of `fold` in `where`, or its recorded readings (`readings.kept_judge`); refuses
    one made otherwise than `shipped`."""
    folder = where / f"fold-{fold}"
    command = f"tutor models train-judge --crossfit{option}"
    kind = "late" if option else "pair"
    judge = readings.kept_judge(folder, f"crossfit-{kind}-{fold}", load_judge, command, record)
    if judge is None:
        raise SystemExit(f"no cross-fitted judge in {folder} and no recording of its readings (run `{command}`)")
    if made_as(judge) != made_as(shipped) or judge.manifest["recipe"].get("crossfit") != fold:
        raise SystemExit(f"the cross-fitted judge in {folder} (or its recorded readings) was not made like the "
                         f"shipped judge (run `{command}`)")
    return judge


def encoder_sha256() -> str:
    """The hash of the int8 encoder export the late judges read states from (the index's), as its manifest
    records it (checked against the file when the encoder loads)."""
    from app.config import Settings
    from ingest.embedder import model_id_for
    from ingest.onnx_encoder import encoder_dir, read_manifest

    settings = Settings()
    return str(read_manifest(encoder_dir(settings.index_path, model_id_for(settings.model)))["sha256"])


def made_as(judge: Judge) -> tuple[Any, Any]:
    """A judge's training data and recipe (`recipe_of`: a field newer than the manifest reads as its
    default), less what cross-fitting changes."""
    recipe = asdict(recipe_of(judge.manifest))
    recipe.pop("crossfit")
    return judge.manifest["data"], recipe


def _in_fold(fold: int, row: dict[str, Any]) -> bool:
    return crossfit_fold(row["file"], int(row["number"])) == fold


def main() -> None:
    """Cross-validated figures on the labelled files (by default the dev set and the decision's own
    training answers), then with --write the decision fitted on all of them, written to decision.json;
    with --bank, the bank decision's, written to bank_decision.json."""
    from ingest.embedder import SentenceTransformerEncoder

    bank = "--bank" in sys.argv
    files = [Path(a) for a in sys.argv[1:] if not a.startswith("--")] or list(DEFAULT_FILES)
    if "--record" in sys.argv:
        paths = record(SentenceTransformerEncoder())
        print("\n".join(f"recorded {p}" for p in paths) or "no cross-fitted judge here to record")
        return
    data = labelled(files, SentenceTransformerEncoder(), bank)
    figures = crossval(data, bank=bank)
    print(json.dumps({"grouped_cv": figures}, indent=2))
    if "--write" in sys.argv:
        pair = default_judge().version
        version = f"{BANK_GRADER}+{pair}+{offline_late_judge().version}" if bank else f"{DECISION_GRADER}+{pair}"
        fitted_on = [str(p.resolve().relative_to(DATA_DIR.parent.resolve())) for p in files]
        x = bank_rows(data) if bank else data.x
        path = BANK_DECISION_PATH if bank else DECISION_PATH
        path.write_text(json.dumps({**fit(x[data.learn], data.y[data.learn], version, bank=bank).to_dict(),
                                    "fitted_on": fitted_on, "grouped_cv": figures}, indent=2) + "\n",
                        encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
