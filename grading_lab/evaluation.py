"""Dev-set evaluation: the grader against a plain-cosine baseline, 3-way and correct-vs-not."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from app.answers.items import item_for
from app.config import DATA_DIR
from app.grading.build import prepare_many
from app.grading.grader import GradeResult, Graders, grade_many
from app.grading.rubric import GradingItem, Rubric, attach_neighbours
from grading_lab.logreg import macro_f1
from ingest.annotations import load_annotations
from ingest.embedder import Encoder
from ingest.parsers import parse_document
from ingest.records import build_records
from ingest.taxonomy import Taxonomy

LABELS = ["correct", "partial", "incorrect"]
RAW_DIR = DATA_DIR / "raw"
ANNOTATIONS = DATA_DIR / "annotations.yaml"


class MemoEncoder:
    """Remembers vectors within one evaluation so the baseline reuses the grader's encodes."""

    def __init__(self, inner: Encoder) -> None:
        self.inner, self.model_id, self.dim = inner, inner.model_id, inner.dim
        self.memo: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Encode only unseen texts, in one batch."""
        missing = sorted({t for t in texts if t not in self.memo})
        if missing:
            self.memo.update(zip(missing, self.inner.encode(missing), strict=True))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.memo[t] for t in texts])


def bank_items(raw_dir: Path = RAW_DIR, annotations: Path = ANNOTATIONS) -> dict[tuple[str, int], GradingItem]:
    """GradingItems built the way ingestion and serving build them, keyed by (file name, question number)."""
    results = [parse_document(path) for path in sorted(raw_dir.glob("*.txt"))]
    taxonomy = Taxonomy.load(DATA_DIR / "taxonomy.yaml")
    records = build_records(results, taxonomy, load_annotations(annotations), [])
    return {(Path(r.source_path).name, r.number): item_for(r) for r in records}


@dataclass
class EvalReport:
    """Figures for the grader and the cosine baseline on a labelled answer file."""

    n: int
    accuracy3: float
    macro_f1_3: float
    accuracy2: float
    macro_f1_2: float
    confusion: dict[str, dict[str, int]]
    per_kind: dict[str, tuple[int, float]]
    baseline_accuracy3: float
    baseline_macro_f1_3: float
    baseline_accuracy2: float
    baseline_macro_f1_2: float
    baseline_thresholds: dict[str, list[float]]
    errors: list[dict[str, str]] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)  # the grader's, one per answer in file order
    # The previous grader version (the rule stack, grader-1.4) on the same answers, when evaluated.
    previous: dict[str, Any] = field(default_factory=dict)
    # Correct answers that were told they hold a misconception (the worst error).
    correct_called_misconception: int = 0


def _two_way(labels: list[str]) -> list[str]:
    return ["correct" if x == "correct" else "not" for x in labels]


def _accuracy(truth: list[str], pred: list[str]) -> float:
    return sum(t == p for t, p in zip(truth, pred, strict=True)) / max(1, len(truth))


def _baseline(truth: list[str], cos: np.ndarray) -> tuple[list[str], list[str], dict[str, list[float]]]:
    """Best thresholds chosen after the fact: one for 2-way, two for 3-way."""
    cands = np.unique(np.quantile(cos, np.linspace(0, 1, 121)))
    truth2 = _two_way(truth)
    best2 = max(cands, key=lambda t: macro_f1(truth2, ["correct" if c >= t else "not" for c in cos],
                                              ["correct", "not"]))
    best3, best_f = (cands[0], cands[0]), -1.0
    truth_i = np.array([LABELS.index(t) for t in truth])
    for i, lo in enumerate(cands):
        for hi in cands[i:]:
            f = _f1_codes(truth_i, np.where(cos >= hi, 0, np.where(cos >= lo, 1, 2)))
            if f > best_f:
                best3, best_f = (lo, hi), f
    pred2 = ["correct" if c >= best2 else "not" for c in cos]
    lo, hi = best3
    pred3 = np.where(cos >= hi, "correct", np.where(cos >= lo, "partial", "incorrect")).tolist()
    return pred3, pred2, {"2way": [float(best2)], "3way": [float(lo), float(hi)]}


def _f1_codes(truth: np.ndarray, pred: np.ndarray) -> float:
    """Macro-F1 over three integer-coded labels (vectorised, for the threshold search)."""
    conf = np.bincount(truth * 3 + pred, minlength=9).reshape(3, 3)
    tp = np.diag(conf)
    denom = conf.sum(axis=0) + conf.sum(axis=1)
    return float(np.mean(np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0)))


def evaluate(path: Path, encoder: Encoder, items: dict[tuple[str, int], GradingItem] | None = None, *,
             graders: Graders | None = None, previous: bool = False) -> EvalReport:
    """Grade every labelled answer in a dev file (batched) and compare with plain cosine (and, with
    `previous`, with the previous grader version).

    items are keyed by (file, number); by default they are built as production builds them.
    """
    rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    items = bank_items() if items is None else items
    memo = MemoEncoder(encoder)
    targets = rubrics_of(rows, items, memo)
    answers = [r["answer"] for r in rows]
    results = grade_many(targets, answers, memo, graders=graders)
    report = _report(rows, results, baseline_cosines(rows, items, memo))
    if previous:
        old = _report(rows, grade_many(targets, answers, memo, graders=Graders(rules=True)), np.zeros(len(rows)))
        report.previous = {"macro_f1_3": old.macro_f1_3, "macro_f1_2": old.macro_f1_2, "accuracy3": old.accuracy3,
                           "accuracy2": old.accuracy2, "per_kind": old.per_kind,
                           "correct_called_misconception": old.correct_called_misconception}
    return report


def bank_rubrics(encoder: Encoder, items: dict[tuple[str, int], GradingItem] | None = None
                 ) -> dict[tuple[str, int], Rubric]:
    """The bank's rubrics (of `items`, by default the bank's) by (seed file, question number), with their
    neighbours, as serving builds them."""
    items = bank_items() if items is None else items
    keys = sorted(items)
    rubrics = dict(zip(keys, prepare_many([items[k] for k in keys], encoder), strict=True))
    attach_neighbours(list(rubrics.values()))
    return rubrics


def inline_item(row: dict[str, Any]) -> GradingItem:
    """A labelled row's question passed as the inline form passes it (its text and accepted answers only)."""
    return GradingItem(str(row["question"]), [str(a) for a in row["reference_answers"]])


def is_inline(row: dict[str, Any]) -> bool:
    """Whether a labelled row carries its own question (an inline set) rather than naming a bank question."""
    return "reference_answers" in row


def rubrics_of(rows: list[dict[str, Any]], items: dict[tuple[str, int], GradingItem], encoder: Encoder) -> list[Rubric]:
    """Each labelled row's question as production grades it: a bank question's rubric, with the bank's
    neighbours; a row that carries its own question and accepted answers, as the inline form prepares it
    (no neighbours, wrong options, explanation or examples)."""
    bank_rows = [r for r in rows if not is_inline(r)]
    missing = {(r["file"], int(r["number"])) for r in bank_rows} - set(items)
    if missing:
        raise ValueError(f"dev rows refer to unknown questions: {sorted(missing)[:5]}")
    rubrics = bank_rubrics(encoder, items) if bank_rows else {}
    inline = {(r["question"], tuple(r["reference_answers"])): inline_item(r) for r in rows if is_inline(r)}
    prepared = dict(zip(inline, prepare_many(list(inline.values()), encoder), strict=True))
    return [prepared[(r["question"], tuple(r["reference_answers"]))] if is_inline(r)
            else rubrics[(r["file"], int(r["number"]))] for r in rows]


def baseline_cosines(rows: list[dict[str, Any]], items: dict[tuple[str, int], GradingItem],
                     encoder: Encoder) -> np.ndarray:
    """Plain cosine of each answer with its question's nearest reference answer."""
    vecs = encoder.encode([r["answer"] for r in rows])
    refs = [tuple(r["reference_answers"] if is_inline(r) else items[(r["file"], int(r["number"]))].reference_answers)
            for r in rows]
    encoded = {ref: encoder.encode(list(ref)) for ref in dict.fromkeys(refs)}  # each question's answers once
    return np.array([float((encoded[ref] @ v).max()) for ref, v in zip(refs, vecs, strict=True)])


def _key(row: dict[str, Any]) -> str:
    """A labelled row's question, short: "003#5" for a bank question, the row's `qid` for an inline one."""
    return str(row.get("qid", "?")) if is_inline(row) else f"{row['file'][:3]}#{row['number']}"


def _report(rows: list[dict[str, str]], results: list[GradeResult], cos: np.ndarray) -> EvalReport:
    truth = [r["label"] for r in rows]
    pred = [res.verdict for res in results]
    confusion = {t: dict.fromkeys(LABELS, 0) for t in LABELS}
    for t, p in zip(truth, pred, strict=True):
        confusion[t][p] += 1
    kinds: dict[str, list[bool]] = defaultdict(list)
    for r, p in zip(rows, pred, strict=True):
        kinds[r.get("kind", "?")].append(p == r["label"])
    base3, base2, thresholds = _baseline(truth, cos)
    errors = [{"key": _key(r), "kind": r.get("kind", "?"), "label": r["label"],
               "verdict": res.verdict, "flags": ",".join(res.flags), "answer": r["answer"]}
              for r, res in zip(rows, results, strict=True) if res.verdict != r["label"]]
    return EvalReport(
        n=len(rows), accuracy3=_accuracy(truth, pred), macro_f1_3=macro_f1(truth, pred, LABELS),
        accuracy2=_accuracy(_two_way(truth), _two_way(pred)),
        macro_f1_2=macro_f1(_two_way(truth), _two_way(pred), ["correct", "not"]),
        confusion=confusion,
        per_kind={k: (len(v), sum(v) / len(v)) for k, v in sorted(kinds.items())},
        baseline_accuracy3=_accuracy(truth, base3), baseline_macro_f1_3=macro_f1(truth, base3, LABELS),
        baseline_accuracy2=_accuracy(_two_way(truth), base2),
        baseline_macro_f1_2=macro_f1(_two_way(truth), base2, ["correct", "not"]),
        baseline_thresholds=thresholds, errors=errors, verdicts=pred,
        correct_called_misconception=sum(r["label"] == "correct" and res.matched_misconception is not None
                                         for r, res in zip(rows, results, strict=True)))


def format_report(report: EvalReport) -> str:
    """A plain-text table: grader vs cosine baseline, confusion matrix, per-kind accuracy."""
    prev = report.previous
    head = f"{'':26s}{'grader':>9s}{'cosine':>9s}" + (f"{'previous':>10s}" if prev else "")

    def row(name: str, now: float, cosine: float, key: str) -> str:
        return f"{name:26s}{now:9.3f}{cosine:9.3f}" + (f"{prev[key]:10.3f}" if prev else "")

    lines = [f"{report.n} answers", head,
             row("3-way accuracy", report.accuracy3, report.baseline_accuracy3, "accuracy3"),
             row("3-way macro-F1", report.macro_f1_3, report.baseline_macro_f1_3, "macro_f1_3"),
             row("correct-vs-not accuracy", report.accuracy2, report.baseline_accuracy2, "accuracy2"),
             row("correct-vs-not macro-F1", report.macro_f1_2, report.baseline_macro_f1_2, "macro_f1_2"),
             f"correct answers told they hold a misconception: {report.correct_called_misconception}"
             + (f" (previous: {prev['correct_called_misconception']})" if prev else ""),
             "(cosine thresholds chosen after the fact on this file: "
             f"2-way {report.baseline_thresholds['2way'][0]:.3f}, 3-way "
             + " / ".join(f"{t:.3f}" for t in report.baseline_thresholds["3way"]) + ")",
             "", "confusion (rows = label, columns = verdict)",
             f"{'':12s}" + "".join(f"{x:>11s}" for x in LABELS)]
    for t in LABELS:
        lines.append(f"{t:12s}" + "".join(f"{report.confusion[t][p]:11d}" for p in LABELS))
    lines += ["", "per kind (n, accuracy" + (", previous)" if prev else ")")]
    lines += [f"  {k:18s}{n:5d}{acc:8.3f}" + (f"{prev['per_kind'][k][1]:10.3f}" if prev else "")
              for k, (n, acc) in report.per_kind.items()]
    return "\n".join(lines)


def summary(report: EvalReport) -> dict[str, float]:
    """The headline figures, as stored in dev_baseline.json."""
    return {"macro_f1_3": round(report.macro_f1_3, 4), "macro_f1_2": round(report.macro_f1_2, 4),
            "accuracy3": round(report.accuracy3, 4), "accuracy2": round(report.accuracy2, 4),
            "baseline_macro_f1_3": round(report.baseline_macro_f1_3, 4),
            "baseline_macro_f1_2": round(report.baseline_macro_f1_2, 4)}


def main() -> None:
    """`python -m grading_lab.evaluation [FILE]`: print the report and the misgraded answers."""
    import sys

    from ingest.embedder import SentenceTransformerEncoder

    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DATA_DIR / "eval" / "dev.jsonl"
    report = evaluate(path, SentenceTransformerEncoder(), previous=True)
    print(format_report(report))
    if "-v" in sys.argv:
        for e in report.errors:
            print(f"{e['key']:7s} {e['kind']:16s} {e['label']:>9s} -> {e['verdict']:9s} [{e['flags']}] "
                  f"{e['answer'][:110]}")
    print(Counter(e["kind"] for e in report.errors))


if __name__ == "__main__":
    main()
