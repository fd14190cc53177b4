"""Do the judges read a partial answer as right against one part of a two-part accepted answer?

Partial answers are the grader's weakest kind (docs/GRADING.md, "Known weak spots"): many give one
part of the accepted answer right and are graded `incorrect`. This probe cuts each accepted answer of
two or more parts (at ";" and ", ", parts of three words or more) and has both judges read the answer
against each part, as they read it against the whole. Per (label, served verdict), over the labelled
files no shipped model trained on, it prints how many answers either judge-pair reads as right
against some part (both judges' P(correct) >= 0.5), and how many neither reads as wrong against some
part (both P(incorrect) < 0.5) beside the same against the whole accepted answer. A part that lifts
partial answers graded `incorrect` and not wrong ones would be a signal for the decision.

    python -m grading_lab.parts_probe [FILE ...]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

import numpy as np

from app.config import DATA_DIR, Settings
from app.grading.grader import Graders, plan_many
from app.grading.judges import default_judge, offline_late_judge
from app.grading.rubric import Rubric
from grading_lab.devset import read_rows
from grading_lab.evaluation import MemoEncoder, bank_items, rubrics_of

DEFAULT_FILES = (DATA_DIR / "eval" / "dev.jsonl", DATA_DIR / "eval" / "near_copies.jsonl",
                 DATA_DIR / "eval" / "evasive.jsonl", DATA_DIR / "eval" / "swaps.jsonl",
                 DATA_DIR / "eval" / "swaps_more.jsonl", DATA_DIR / "eval" / "roles.jsonl",
                 *(DATA_DIR / "train" / f"written_answers_{s}.jsonl" for s in "defg"))
RIGHT, NOT_WRONG = 0.5, 0.5


def parts(reference: str) -> list[str]:
    """The accepted answer's parts (at ";" and ", ", each of three words or more); none for one part."""
    cut = [p.strip() for p in re.split(r";|, ", reference) if len(p.split()) >= 3]
    return cut if len(cut) >= 2 else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, default=list(DEFAULT_FILES))
    args = parser.parse_args()
    from ingest.embedder import SentenceTransformerEncoder

    settings = Settings()
    encoder = MemoEncoder(SentenceTransformerEncoder(settings.model))
    items = bank_items()
    graders = Graders(late=offline_late_judge(settings))
    pair, late = default_judge(), graders.late_judge()
    assert late is not None
    counts: Counter[tuple[str, str, str]] = Counter()
    for path in args.files:
        rows = read_rows(path)
        rubrics: list[Rubric] = rubrics_of(rows, items, encoder)
        plan = plan_many(rubrics, [r["answer"] for r in rows])
        vecs = encoder.encode(plan.texts)
        results = plan.finish(vecs, graders)
        served = {i: results[i].verdict for i in plan.todo}
        for i, text in zip(plan.todo, plan.texts, strict=True):
            rubric = rubrics[i]
            cut = parts(rubric.item.reference_answers[0])
            if not cut or not graders.reads_late(rubric):
                continue
            triples = [(rubric.item.question, p, text) for p in [rubric.item.reference_answers[0], *cut]]
            both = np.stack([pair.probabilities(triples), late.probabilities(triples)])  # judge, pair, class
            key = (rows[i]["label"], served[i])
            counts[(*key, "answers")] += 1
            counts[(*key, "right against a part")] += int((both[:, 1:, 0].min(axis=0) >= RIGHT).any())
            counts[(*key, "not wrong against the whole")] += int(both[:, 0, 2].max() < NOT_WRONG)
            counts[(*key, "not wrong against a part")] += int((both[:, 1:, 2].max(axis=0) < NOT_WRONG).any())
    columns = ("answers", "right against a part", "not wrong against the whole", "not wrong against a part")
    print("label -> served verdict | " + " | ".join(columns))
    for label, verdict in sorted({(k[0], k[1]) for k in counts}):
        print(f"{label} -> {verdict} | " + " | ".join(str(counts[(label, verdict, c)]) for c in columns))


if __name__ == "__main__":
    main()
