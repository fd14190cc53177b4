"""The pair judge: a cross-encoder that reads an accepted answer and a learner's answer together.

Sentence vectors barely see a negation or two swapped roles ("sync SGD waits, async does not"
against the reverse scores about as close as a paraphrase). The judge reads both texts word by
word, as one input, and gives P(correct), P(partial), P(incorrect). It is MiniLM fine-tuned by
`tutor models train-judge` (grading_lab/judge_train.py) and served as int8 ONNX with onnxruntime
(no PyTorch); the manifest records how it was made, and the files are checked against the
manifest's hashes when it is loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from app.grading.decision import VERDICTS
from ingest.identity import file_sha256
from ingest.onnx_encoder import cpu_session

if TYPE_CHECKING:
    from tokenizers import Tokenizer

JUDGE_LABELS = VERDICTS  # the judge's classes are the verdicts, in the same order
MANIFEST = "judge.json"
ONNX_FILE = "judge-int8.onnx"
MAX_LENGTH = 160  # tokens of (accepted answer + question, answer) the judge reads


class JudgeArtifactError(RuntimeError):
    """The judge's files are missing, or do not match the hashes in its manifest."""


def pair_text(question: str, reference: str, with_question: bool = True) -> str:
    """The first text the judge reads: the accepted answer, then the question (cut first when long).

    Without the question (a judge trained so: its recipe's `question` is false), the accepted answer alone.
    """
    return f"{reference} (question: {question})" if with_question else reference


def read_judge_manifest(folder: Path) -> dict[str, Any]:
    """The judge's manifest (a pair judge's or a late judge's), after checking its files against its hashes."""
    from app.grading.latejudge import is_late, read_late_manifest

    return read_late_manifest(folder) if is_late(folder) else _read_judge(folder)[0]


def _read_judge(folder: Path) -> tuple[dict[str, Any], str]:
    """The judge's manifest and its tokenizer's text, checked against the manifest's hashes.

    The tokenizer is hashed from the very text it is then built from, so a file replaced between the
    check and the read cannot slip in.
    """
    try:
        manifest: dict[str, Any] = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise JudgeArtifactError(f"no pair judge in {folder.name}/ (run `tutor models train-judge`)") from exc
    for name in (ONNX_FILE, "tokenizer.json"):
        if not (folder / name).is_file():
            raise JudgeArtifactError(f"the pair judge's {name} is missing")
    if file_sha256(folder / ONNX_FILE) != manifest.get("onnx_sha256"):
        raise JudgeArtifactError(f"the pair judge's {ONNX_FILE} does not match its manifest (damaged or replaced)")
    tokenizer = (folder / "tokenizer.json").read_bytes()
    if hashlib.sha256(tokenizer).hexdigest() != manifest.get("tokenizer_sha256"):
        raise JudgeArtifactError("the pair judge's tokenizer.json does not match its manifest (damaged or replaced)")
    try:
        return manifest, tokenizer.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JudgeArtifactError("the pair judge's tokenizer.json is not UTF-8 text") from exc


class PairJudge:
    """P(correct), P(partial), P(incorrect) of answers, each read together with one accepted answer."""

    def __init__(self, folder: Path, threads: int | None = None) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        self.manifest, self._tokenizer_json = _read_judge(folder)
        if tuple(self.manifest.get("labels", ())) != JUDGE_LABELS:
            raise JudgeArtifactError(f"the pair judge's labels {self.manifest.get('labels')} are not {JUDGE_LABELS}")
        self.version = f"{self.manifest['recipe']['version']}@{self.manifest['onnx_sha256'][:12]}"
        self.with_question = bool(self.manifest["recipe"].get("question", True))  # read as it was trained
        # As in training: the first text (accepted answer, then question) is cut. An answer too long
        # to fit even alone is cut too (the longer of the two first), by a second tokenizer, built
        # from the same text the first time an answer needs it: each tokenizer holds about 6 MB, for
        # answers that are rare (resident memory after the load: bench/compare_commits.py).
        self._max_length = int(self.manifest.get("max_length", MAX_LENGTH))
        self._tokenizer = self._new_tokenizer("only_first")
        self._fallback: Tokenizer | None = None
        self._fallback_lock = threading.Lock()
        self._session = cpu_session(folder / ONNX_FILE, threads or min(4, os.cpu_count() or 1))
        self._inputs = {i.name for i in self._session.get_inputs()}

    def probabilities(self, triples: Sequence[tuple[str, str, str]]) -> np.ndarray:
        """One row of JUDGE_LABELS probabilities per (question, accepted answer, answer).

        Each pair is its own run, never padded beside another: dynamic int8 scales a run's
        activations over the whole batch, so a batch-mate would move a pair's probabilities
        (docs/GRADING_LOG.md, "Earlier figures"), and a pair's reading must not depend on what was
        read with it (tests/app/grading/test_pairjudge.py).
        """
        out = np.zeros((len(triples), len(JUDGE_LABELS)), dtype=np.float32)
        for row, (q, r, a) in enumerate(triples):
            out[row] = self._run(self._encoded(pair_text(q, r, self.with_question), a))
        return out

    def _encoded(self, first: str, answer: str) -> Any:
        try:
            return self._tokenizer.encode(first, answer)
        except Exception:  # the tokenizers library raises a bare Exception when `only_first` cannot fit
            return self._longest_first().encode(first, answer)

    def _run(self, encoding: Any) -> np.ndarray:
        ids = np.asarray([encoding.ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.asarray([encoding.attention_mask], dtype=np.int64),
                 "token_type_ids": np.asarray([encoding.type_ids], dtype=np.int64)}
        logits = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0][0]
        shifted = np.exp(logits - logits.max())
        return shifted / shifted.sum()

    def _new_tokenizer(self, strategy: str) -> Tokenizer:
        """A tokenizer of the judge's, truncating pairs to its input length by `strategy`."""
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_str(self._tokenizer_json)
        tokenizer.enable_truncation(max_length=self._max_length, strategy=strategy)
        tokenizer.no_padding()  # each pair is its own run
        return tokenizer

    def _longest_first(self) -> Tokenizer:
        """The fallback tokenizer, built once, on first need (concurrent callers wait for one build)."""
        with self._fallback_lock:
            if self._fallback is None:
                self._fallback = self._new_tokenizer("longest_first")
            return self._fallback
