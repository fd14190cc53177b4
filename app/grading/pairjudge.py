"""The pair judge: a cross-encoder that reads an accepted answer and a learner's answer together.

Sentence vectors barely see a negation or two swapped roles ("sync SGD waits, async does not"
against the reverse scores about as close as a paraphrase). The judge reads both texts word by
word, as one input, and gives P(correct), P(partial), P(incorrect). It is MiniLM fine-tuned by
`tutor models train-judge` (grading_lab/judge_train.py) and served as int8 ONNX with onnxruntime
(no PyTorch); the manifest records how it was made, and the files are checked against the
manifest's hashes when it is loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from app.config import Settings
from app.grading.decision import VERDICTS
from ingest.cross_encoder import CrossEncoder, read_checked_manifest

JUDGE_LABELS = VERDICTS  # the judge's classes are the verdicts, in the same order
MANIFEST = "judge.json"
ONNX_FILE = "judge-int8.onnx"
MAX_LENGTH = 160  # tokens of (accepted answer + question, answer) the judge reads


class JudgeArtifactError(RuntimeError):
    """The judge's files are missing, or do not match the hashes in its manifest."""


def pair_text(question: str, reference: str) -> str:
    """The first text the judge reads: the accepted answer, then the question (cut first when long)."""
    return f"{reference} (question: {question})"


def read_judge_manifest(folder: Path) -> dict[str, Any]:
    """The judge's manifest, after checking the model and tokenizer files against its hashes."""
    return read_checked_manifest(folder, MANIFEST, ONNX_FILE, "pair judge", JudgeArtifactError,
                                 rebuild="tutor models train-judge")


class PairJudge(CrossEncoder):
    """P(correct), P(partial), P(incorrect) of answers, each read together with one accepted answer."""

    def __init__(self, folder: Path, threads: int | None = None) -> None:
        self.manifest = read_judge_manifest(folder)
        if tuple(self.manifest.get("labels", ())) != JUDGE_LABELS:
            raise JudgeArtifactError(f"the pair judge's labels {self.manifest.get('labels')} are not {JUDGE_LABELS}")
        self.version = f"{self.manifest['recipe']['version']}@{self.manifest['onnx_sha256'][:12]}"
        # As in training: the first text (accepted answer, then question) is cut. An answer too long
        # to fit even alone is cut too (the longer of the two first).
        super().__init__(folder, ONNX_FILE, int(self.manifest.get("max_length", MAX_LENGTH)), threads)

    def probabilities(self, triples: Sequence[tuple[str, str, str]]) -> np.ndarray:
        """One row of JUDGE_LABELS probabilities per (question, accepted answer, answer)."""
        if not triples:
            return np.zeros((0, len(JUDGE_LABELS)), dtype=np.float32)
        return self.pair_probabilities([(pair_text(q, r), a) for q, r, a in triples])


@lru_cache(maxsize=2)
def load_judge(folder: Path) -> PairJudge:
    """The judge in a folder, loaded once per process."""
    return PairJudge(folder)


_configured: list[PairJudge] = []  # the process's judge, once chosen


def use_judge(judge: PairJudge) -> None:
    """Make this the judge that grading uses when it is given none (the runtime's, when it loads)."""
    _configured[:] = [judge]


def default_judge() -> PairJudge:
    """The process's judge: the runtime's, or else the one `TUTOR_JUDGE_DIR` names (by default the
    committed models/judge/), read once. Grading never reads the settings itself."""
    if not _configured:
        use_judge(load_judge(Settings().judge_dir))
    return _configured[0]
