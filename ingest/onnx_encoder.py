"""The serving encoder: the int8 ONNX export of the model, run with onnxruntime (no torch import).

The export's manifest (encoder.json) records the SHA-256 of the model, of the tokenizer and of its
own content; all three are checked when the encoder is built, so a damaged export keeps the service
from saying it is ready instead of serving vectors that match nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from contracts.errors import UnavailableError
from ingest.identity import file_sha256

log = logging.getLogger(__name__)

ENCODER_MANIFEST = "encoder.json"
ONNX_FILE = "model-int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
MANIFEST_HASH = "manifest_sha256"  # the manifest's hash of its own content (every other key)
# The manifest's hash of each file of the export.
FILE_HASHES = ((ONNX_FILE, "sha256"), (TOKENIZER_FILE, "tokenizer_sha256"))
# The token states after a transformer layer (0-based), as the export names that layer's output.
LAYER_STATES = "/inner/encoder/layer.{}/output/LayerNorm/LayerNormalization_output_0"
# The export with one layer's token states among its outputs (`states_model`), derived from ONNX_FILE,
# and beside it the record of its hash and of the export it was derived from.
STATES_FILE = "model-int8-states{}.onnx"
STATES_RECORD = "model-int8-states{}.json"
RECENT_STATES = 128  # the texts whose kept states an encoder holds (`keep_states`), the latest first


class EncoderArtifactError(RuntimeError):
    """The exported encoder is missing or does not belong to the configured model."""


class EncoderStatesError(EncoderArtifactError):
    """The exported encoder has no tensor for the layer states asked of it (another model's export)."""


class EncoderIntegrityError(RuntimeError):
    """The exported encoder's files do not match the hashes in its manifest.

    Not an EncoderArtifactError: a missing export may be served by the PyTorch model instead
    (`app.serving.encoders`), a damaged one is refused, so that the service is not ready until it is
    exported again. The message names no server path: it is the reason /readyz gives.
    """


class EncoderRunError(UnavailableError):
    """The encoder failed on a request: a 503 in the project's error shape; the cause goes to the log only."""

    def __init__(self) -> None:
        super().__init__("the encoder could not run; try again shortly")


def manifest_digest(manifest: dict[str, object]) -> str:
    """The SHA-256 of a manifest's content without its own hash (canonical JSON: sorted keys, no spaces)."""
    body = {k: v for k, v in manifest.items() if k != MANIFEST_HASH}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def write_manifest(folder: Path, manifest: dict[str, object]) -> dict[str, object]:
    """Record the hashes of the export's files and of the manifest itself, and write it; returns what was written."""
    recorded = {k: v for k, v in manifest.items() if k != MANIFEST_HASH}
    for name, key in FILE_HASHES:
        recorded[key] = file_sha256(folder / name)
    recorded[MANIFEST_HASH] = manifest_digest(recorded)
    (folder / ENCODER_MANIFEST).write_text(json.dumps(recorded, indent=1), encoding="utf-8")
    return recorded


def verify_export(folder: Path, manifest: dict[str, object]) -> None:
    """Raise EncoderIntegrityError unless the manifest and the export's files match the recorded hashes.

    Costs one read of the model and the tokenizer: about 15 ms for all-MiniLM-L6-v2 (23 MB).
    """
    def refuse(message: str) -> EncoderIntegrityError:
        log.warning("ONNX encoder folder %s: %s", folder, message)
        return EncoderIntegrityError(f"{message}; run `tutor models export`")

    if MANIFEST_HASH not in manifest or any(key not in manifest for _, key in FILE_HASHES):
        raise refuse("the ONNX encoder's manifest records no checksums (an older export)")
    if manifest_digest(manifest) != manifest[MANIFEST_HASH]:
        raise refuse("the ONNX encoder's manifest does not match its checksum (damaged or edited)")
    for name, key in FILE_HASHES:
        try:
            actual = file_sha256(folder / name)
        except OSError as exc:
            raise refuse(f"the ONNX encoder's {name} is missing or unreadable") from exc
        if actual != manifest[key]:
            raise refuse(f"the ONNX encoder's {name} does not match its manifest (damaged or replaced)")


def encoder_dir(index_root: Path, model_id: str) -> Path:
    """Where the exported encoder of a model lives, beside the index."""
    safe = model_id.replace("/", "__").replace("@", "-")
    return index_root / "encoders" / safe


def read_manifest(folder: Path) -> dict[str, object]:
    """The export's manifest (source model id, file hashes, checks), unchecked: see `verify_export`."""
    try:
        data: dict[str, object] = json.loads((folder / ENCODER_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.info("no exported ONNX encoder in %s", folder)
        raise EncoderArtifactError(
            f"no exported ONNX encoder in {folder.name}/; run `tutor models export` (or `tutor ingest`)"
        ) from exc
    if not isinstance(data, dict):
        raise EncoderIntegrityError("the ONNX encoder's manifest is not an object; run `tutor models export`")
    return data


class OnnxEncoder:
    """Tokenise with the model's fast tokenizer, run int8 ONNX: one text per run, never padded."""

    # Safe to call from several threads at once: onnxruntime sessions take concurrent runs, and the
    # tokenizer's settings are fixed here, so concurrent calls only read it.
    concurrent_calls = True

    def __init__(self, folder: Path, model_id: str, threads: int | None = None, solo_threads: int = 0,
                 states_layer: int | None = None) -> None:
        """`threads`: onnxruntime threads per call. `solo_threads` > `threads`: a second session on
        that many threads, for `encode_alone` (a request with the encoder to itself); about 40 MB.
        `states_layer`: every encode also keeps its text's token states after that transformer layer
        (0-based), read back by `layer_states` (the late judge's input, app/grading/latejudge.py)."""
        # Tokenise on the calling thread: batches here are small, and the batcher already runs one
        # encode per core; the tokenizer's own thread pool only added threads contending for those
        # cores (measured: about +5 % answers/s at 32 clients without it). An explicit setting wins.
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from tokenizers import Tokenizer

        manifest = read_manifest(folder)
        if manifest.get("model_id") != model_id:
            raise EncoderArtifactError(
                f"exported encoder in {folder.name}/ is for {manifest.get('model_id')}, not {model_id}; "
                "run `tutor models export`"
            )
        verify_export(folder, manifest)
        self.model_id = model_id
        self.onnx_sha256 = str(manifest.get("sha256", ""))
        self.dim = int(manifest["dim"])  # type: ignore[call-overload]
        self.max_length = int(manifest.get("max_length", 256))  # type: ignore[call-overload]
        tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        tokenizer.no_padding()  # the shipped tokenizer.json pads every input to 128 tokens; no text is padded here
        tokenizer.enable_truncation(max_length=self.max_length)
        self._tokenizer = tokenizer
        self.threads = threads or min(4, os.cpu_count() or 1)
        self.states_layer = states_layer
        model: Path | bytes = folder / ONNX_FILE
        self._outputs = ["last_hidden_state"]
        if states_layer is not None:
            model = states_model(folder, manifest, states_layer)
            self._outputs.append(LAYER_STATES.format(states_layer))
        self._recent: OrderedDict[str, np.ndarray] = OrderedDict()
        self._recent_lock = threading.Lock()
        self._session = cpu_session(model, self.threads)
        # Only one session per thread count: a solo session no wider than the shared one is that one.
        wider = solo_threads > self.threads
        self.solo_threads = solo_threads if wider else self.threads
        self._solo = cpu_session(model, solo_threads, spin=True) if wider else self._session
        self._inputs = {i.name for i in self._session.get_inputs()}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Mean-pooled, L2-normalised sentence vectors (on `threads` onnxruntime threads).

        Each text is its own run, never padded beside another: dynamic int8 scales a run's
        activations over the whole padded batch, so a batch-mate would move a text's vector, and an
        answer's grade must not depend on who else was graded at the same moment. A text's vector
        is the same in any batch (tests/ingest/test_onnx.py). Batched runs were no faster per text on CPU
        (`bench/bench_encoder.py`: dev answers per second by batch size).
        """
        return self._encode(self._session, texts)

    def encode_alone(self, texts: Sequence[str]) -> np.ndarray:
        """`encode` on `solo_threads` threads: for a call that has the cores to itself.

        One short answer runs about 30-45 % faster on two threads than on one (2-core machines,
        `bench/bench_encoder.py`); under load, single-threaded calls side by side use the cores better.
        """
        return self._encode(self._solo, texts)

    def layer_states(self, texts: Sequence[str], max_length: int | None = None) -> list[np.ndarray]:
        """Each text's token states after `states_layer` (float32, tokens x dim), read alone: those a
        recent encode kept when the text is cut no shorter than the encoder cuts it, else a new run.
        `max_length`: cut the text to that many tokens (with its [CLS] and [SEP]) first."""
        if self.states_layer is None:
            raise RuntimeError("this encoder keeps no layer states (built without `states_layer`)")
        out: list[np.ndarray] = []
        cut = max_length is not None and max_length < self.max_length
        for text in texts:
            kept = None if cut else self._kept(text)
            if kept is None:
                ids = self._tokenizer.encode(text, add_special_tokens=True).ids
                if cut and len(ids) > max_length:  # type: ignore[operator]
                    ids = [*ids[: max_length - 1], ids[-1]]  # type: ignore[operator]
                array = np.asarray([ids], dtype=np.int64)
                kept = self._run(self._session, array, np.ones_like(array), None)[1]
            out.append(kept)
        return out

    def _kept(self, text: str) -> np.ndarray | None:
        with self._recent_lock:
            states = self._recent.get(text)
            if states is not None:
                self._recent.move_to_end(text)
            return states

    def _keep(self, text: str, states: np.ndarray) -> None:
        with self._recent_lock:
            self._recent[text] = states
            self._recent.move_to_end(text)
            while len(self._recent) > RECENT_STATES:
                self._recent.popitem(last=False)

    def _encode(self, session: Any, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        for row, encoding in enumerate(self._tokenizer.encode_batch(list(texts), add_special_tokens=True)):
            ids = np.asarray([encoding.ids], dtype=np.int64)
            out[row] = self._run(session, ids, np.ones_like(ids), texts[row])[0][0]
        return out

    def _run(self, session: Any, ids: np.ndarray, mask: np.ndarray,
             text: str | None) -> tuple[np.ndarray, np.ndarray]:
        """One run: the pooled unit vectors, and the first text's layer states (kept under `text` when
        it is given) or an empty array when this encoder keeps none."""
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        # No lock: onnxruntime sessions take concurrent runs (the batcher's workers run one each).
        try:
            hidden, *states = session.run(self._outputs, feeds)
        except Exception as exc:  # onnxruntime's message names its internals: the log keeps it
            log.error("ONNX encoder %s failed on a batch of %d: %s", self.model_id, len(ids), exc)
            raise EncoderRunError() from exc
        layer = states[0][0] if states else np.zeros((0, self.dim), np.float32)
        if states and text is not None:
            self._keep(text, layer)
        # Mean over the real tokens, then unit length. No (batch, tokens, dim) temporary: each numpy
        # call on a large array releases and retakes the GIL, a wait behind the event loop.
        weights = mask.astype(np.float32)
        pooled = np.einsum("btd,bt->bd", hidden, weights) / np.maximum(weights.sum(axis=1, keepdims=True), 1e-9)
        norms = np.sqrt(np.einsum("bd,bd->b", pooled, pooled))[:, None]
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32), layer


def with_outputs(path: Path, names: list[str]) -> bytes:
    """The model at `path` with the named tensors added to its outputs (onnxruntime computes an output
    only when a run asks for it), serialised for a session."""
    import onnx

    model = onnx.load(str(path))
    known = {out for node in model.graph.node for out in node.output}
    missing = [n for n in names if n not in known]
    if missing:
        raise EncoderStatesError(f"the exported encoder has no tensor {missing[0]}; run `tutor models export`")
    model.graph.output.extend(onnx.ValueInfoProto(name=n) for n in names)
    return model.SerializeToString()


def states_model(folder: Path, manifest: dict[str, object], layer: int) -> Path | bytes:
    """The checked export with `layer`'s token states among its outputs, for a session.

    Derived once and written beside the export (STATES_FILE, with its hash and the export's in
    STATES_RECORD); later builds, and `tutor models export`, find it there and hand onnxruntime the
    file. Deriving imports onnx and hands the session the model as bytes: an encoder built that way
    holds about 40 MB more (`bench/bench_states_memory.py`). A stale or damaged file is derived again;
    where the folder cannot be written, the derived model is served from memory (logged).
    """
    path, record = folder / STATES_FILE.format(layer), folder / STATES_RECORD.format(layer)
    try:
        kept = json.loads(record.read_text(encoding="utf-8"))
        if kept.get("source_sha256") == manifest["sha256"] and kept.get("sha256") == file_sha256(path):
            return path
    except (OSError, ValueError, AttributeError, KeyError):
        pass
    model = with_outputs(folder / ONNX_FILE, [LAYER_STATES.format(layer)])
    suffix = f".{os.getpid()}.{threading.get_ident()}.tmp"
    temporary = path
    try:
        for target, body in ((path, model), (record, json.dumps(
                {"source_sha256": manifest["sha256"], "sha256": hashlib.sha256(model).hexdigest(),
                 "layer": layer}).encode())):
            temporary = target.with_name(target.name + suffix)
            temporary.write_bytes(body)
            os.replace(temporary, target)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        log.warning("could not keep the layer-%d states model in %s (%s): holding it in memory", layer, folder, exc)
        return model
    log.info("derived the layer-%d states model in %s", layer, folder)
    return path


def cpu_session(path: Path | bytes, threads: int, spin: bool = False) -> Any:
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
    return ort.InferenceSession(path if isinstance(path, bytes) else str(path), options,
                                providers=["CPUExecutionProvider"])
