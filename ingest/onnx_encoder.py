"""The serving encoder: the int8 ONNX export of the model, run with onnxruntime (no torch import)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ENCODER_MANIFEST = "encoder.json"
ONNX_FILE = "model-int8.onnx"


class EncoderArtifactError(RuntimeError):
    """The exported encoder is missing or does not belong to the configured model."""


def encoder_dir(index_root: Path, model_id: str) -> Path:
    """Where the exported encoder of a model lives, beside the index."""
    safe = model_id.replace("/", "__").replace("@", "-")
    return index_root / "encoders" / safe


def read_manifest(folder: Path) -> dict[str, object]:
    """The export's manifest (source model id, file hash, checks)."""
    try:
        data: dict[str, object] = json.loads((folder / ENCODER_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EncoderArtifactError(
            f"no exported ONNX encoder in {folder}; run `tutor models export` (or `tutor ingest`)"
        ) from exc
    return data


class OnnxEncoder:
    """Tokenise with the model's fast tokenizer (texts of similar length batched together), run int8 ONNX."""

    # Safe to call from several threads at once: onnxruntime sessions take concurrent runs, and the
    # tokenizer's settings are fixed here, so concurrent calls only read it.
    concurrent_calls = True

    def __init__(self, folder: Path, model_id: str, threads: int | None = None, solo_threads: int = 0) -> None:
        """`threads`: onnxruntime threads per call. `solo_threads` > `threads`: a second session on
        that many threads, for `encode_alone` (a request with the encoder to itself); about 40 MB."""
        # Tokenise on the calling thread: batches here are small, and the batcher already runs one
        # encode per core; the tokenizer's own thread pool only added threads contending for those
        # cores (measured: about +5 % answers/s at 32 clients without it). An explicit setting wins.
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from tokenizers import Tokenizer

        manifest = read_manifest(folder)
        if manifest.get("model_id") != model_id:
            raise EncoderArtifactError(
                f"exported encoder in {folder} is for {manifest.get('model_id')}, not {model_id}; "
                "run `tutor models export`"
            )
        self.model_id = model_id
        self.dim = int(manifest["dim"])  # type: ignore[call-overload]
        self.max_length = int(manifest.get("max_length", 256))  # type: ignore[call-overload]
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # The shipped tokenizer.json pads every input to 128 tokens; padding is done per length group.
        padding = tokenizer.padding
        self._pad_id = int(padding["pad_id"]) if padding else 0
        tokenizer.no_padding()  # each group is padded here, to its own longest
        tokenizer.enable_truncation(max_length=self.max_length)
        self._tokenizer = tokenizer
        self.threads = threads or min(4, os.cpu_count() or 1)
        self._session = _session(folder / ONNX_FILE, self.threads)
        # Only one session per thread count: a solo session no wider than the shared one is that one.
        wider = solo_threads > self.threads
        self.solo_threads = solo_threads if wider else self.threads
        self._solo = _session(folder / ONNX_FILE, solo_threads, spin=True) if wider else self._session
        self._inputs = {i.name for i in self._session.get_inputs()}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Mean-pooled, L2-normalised sentence vectors (on `threads` onnxruntime threads).

        Texts run in groups of similar length: padding a short answer to a long batch-mate costs
        compute, and dynamic int8 scales its activations over the whole padded batch, which moves
        the short answer's vector (measured: "idk" beside a long answer fell to cosine 0.96).
        """
        return self._encode(self._session, texts)

    def encode_alone(self, texts: Sequence[str]) -> np.ndarray:
        """`encode` on `solo_threads` threads: for a call that has the cores to itself.

        One short answer runs about 30-45 % faster on two threads than on one (2-core machines,
        `bench/bench_encoder.py`); under load, single-threaded calls side by side use the cores better.
        """
        return self._encode(self._solo, texts)

    def _encode(self, session: Any, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(list(texts), add_special_tokens=True)
        lengths = [len(e.ids) for e in encodings]
        for group in length_groups(lengths):
            ids = np.full((len(group), max(lengths[i] for i in group)), self._pad_id, dtype=np.int64)
            mask = np.zeros_like(ids)
            for row, i in enumerate(group):
                ids[row, : lengths[i]] = encodings[i].ids
                mask[row, : lengths[i]] = 1
            out[group] = self._run(session, ids, mask)
        return out

    def _run(self, session: Any, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        # No lock: onnxruntime sessions take concurrent runs (the batcher's workers run one each).
        (hidden,) = session.run(["last_hidden_state"], feeds)
        # Mean over the real tokens, then unit length. No (batch, tokens, dim) temporary: each numpy
        # call on a large array releases and retakes the GIL, a wait behind the event loop.
        weights = mask.astype(np.float32)
        pooled = np.einsum("btd,bt->bd", hidden, weights) / np.maximum(weights.sum(axis=1, keepdims=True), 1e-9)
        norms = np.sqrt(np.einsum("bd,bd->b", pooled, pooled))[:, None]
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


def _session(path: Path, threads: int, spin: bool = False) -> Any:
    """An onnxruntime session on `threads` threads.

    Idle intra-op threads sleep unless `spin`: spinning steals the cores that the request threads
    need between batches (measured: 99 -> 118 answers/s at 32 clients). The solo session spins
    within a run: a lone answer's run is some fifty short operators, and waking the other thread
    for each was a third of it (one answer on two threads: 3.1 -> 2.2 ms, `bench/bench_encoder.py`).
    Its threads stop spinning as soon as the run returns, so they never hold a core while the
    worker grades and commits, or while the loop answers.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    if spin:
        options.add_session_config_entry("session.force_spinning_stop", "1")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def length_groups(lengths: Sequence[int], slack: float = 1.5, extra: int = 4) -> list[list[int]]:
    """Indices grouped by token length: in a group the longest is at most slack x the shortest + extra."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    groups: list[list[int]] = []
    for i in order:
        if groups and lengths[i] <= lengths[groups[-1][0]] * slack + extra:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups
