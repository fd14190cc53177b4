"""A fine-tuned cross-encoder served as int8 ONNX: two texts read together, one input, class probabilities.

The grader's pair judge (app/grading/pairjudge.py) and the ask path's relevance reader
(app/ask/reader.py) are both MiniLM fine-tuned on pairs (grading_lab/judge_train.py,
grading_lab/ask_reader.py) and exported the encoder's way. This is their common serving half: the
manifest is read and the model and tokenizer files are checked against its hashes before anything
is loaded, and pairs are tokenised exactly as in training (the first text is cut when the pair is too
long; an input too long even then is cut on both sides).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ingest.identity import file_sha256

TOKENIZER_FILE = "tokenizer.json"


def read_checked_manifest(folder: Path, manifest: str, onnx_file: str, what: str,
                          error: type[Exception], rebuild: str) -> dict[str, Any]:
    """A model folder's manifest, after checking its ONNX and tokenizer files against the manifest's
    hashes; `error` (naming the model as `what`, and the command that rebuilds it) when anything is
    missing or does not match."""
    try:
        data: dict[str, Any] = json.loads((folder / manifest).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise error(f"no {what} in {folder.name}/ (run `{rebuild}`)") from exc
    for name, key in ((onnx_file, "onnx_sha256"), (TOKENIZER_FILE, "tokenizer_sha256")):
        path = folder / name
        if not path.is_file():
            raise error(f"the {what}'s {name} is missing")
        if file_sha256(path) != data.get(key):
            raise error(f"the {what}'s {name} does not match its manifest (damaged or replaced)")
    return data


class CrossEncoder:
    """Class probabilities of text pairs from an int8 ONNX sequence classifier and its tokenizer."""

    def __init__(self, folder: Path, onnx_file: str, max_length: int, threads: int | None = None) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        padding = tokenizer.padding
        self._pad_id = int(padding["pad_id"]) if padding else 0
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=max_length, strategy="only_first")
        fallback = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        fallback.no_padding()
        fallback.enable_truncation(max_length=max_length, strategy="longest_first")
        self._tokenizer, self._fallback = tokenizer, fallback
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or min(4, os.cpu_count() or 1)
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(str(folder / onnx_file), options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}

    def pair_probabilities(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One row of class probabilities per (first text, second text), in one call."""
        try:
            encodings = self._tokenizer.encode_batch(list(pairs))
        except Exception:  # the tokenizers library raises a bare Exception when `only_first` cannot fit
            encodings = self._fallback.encode_batch(list(pairs))
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self._pad_id, dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, e in enumerate(encodings):
            n = len(e.ids)
            ids[row, :n], mask[row, :n], types[row, :n] = e.ids, e.attention_mask, e.type_ids
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        logits = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        return (shifted / shifted.sum(axis=1, keepdims=True)).astype(np.float32)
