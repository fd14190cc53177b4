"""Damaged index, manifest or encoder files, or an unreachable Redis, keep the service from saying it
is ready; the reason is short, and no server path or library internals reach a client on any endpoint."""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.config import DEFAULT_MODEL, Settings
from app.db import make_engine, make_sessionmaker, transaction
from app.keys.service import create_key
from app.main import create_app
from app.models import BankState
from app.serving.encoders import EncoderFactory, default_encoder
from ingest.embedder import model_id_for, resolve_model_path
from ingest.index import INDEX_FILE, MANIFEST_FILE, IndexEntry, load_index, version_dir, write_index
from ingest.onnx_encoder import ENCODER_MANIFEST, ONNX_FILE, encoder_dir, write_manifest
from tests.conftest import ingest_with, with_onnx
from tests.fakes import FakeEncoder

# Words a client must never see: library internals of FAISS and onnxruntime.
INTERNALS = ("faiss", "Error in ", "onnxruntime", "InvalidProtobuf", "INVALID_ARGUMENT", "Traceback", ".cpp")


def _live_version(settings: Settings) -> str:
    engine = make_engine(settings.db_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            state = session.get(BankState, "index_version")
            assert state is not None
            return state.value
    finally:
        engine.dispose()


def _live_folder(settings: Settings) -> Path:
    return version_dir(settings.index_path, _live_version(settings))


def _flip_byte(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def _api_key(settings: Settings) -> str:
    engine = make_engine(settings.db_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            _, secret = create_key(session, name="probe", scopes=("grade",))
    finally:
        engine.dispose()
    return secret


@contextmanager
def _serving(settings: Settings, factory: EncoderFactory) -> Iterator[TestClient]:
    app = create_app(settings, factory, load_in_background=False)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def _bodies(client: TestClient, settings: Settings) -> dict[str, Any]:
    """The answers of the endpoints that use the index or the encoder: readiness, ask, quiz, grade."""
    secret = _api_key(settings)
    learner = client.post("/v1/learners", json={})
    assert learner.status_code == 201, learner.text
    replies = {
        "readyz": client.get("/readyz"),
        "ask": client.post("/v1/ask", json={"text": "what does all-gather do"}),
        "quiz": client.post("/v1/sessions", json={"learner_id": learner.json()["id"]}),
        "grade": client.post("/v1/grade", headers={"X-API-Key": secret},
                             json={"question": "What does all-gather do?", "reference_answers": ["every rank gets "
                                   "every shard"], "answer": "each GPU ends with all the pieces"}),
        "questions": client.get("/v1/questions", params={"q": "all-gather"}),
    }
    if replies["quiz"].status_code == 201:  # a session needs no index; its first question is served from the bank
        replies["next"] = client.get(f"/v1/sessions/{replies['quiz'].json()['id']}/next")
    return replies


def _assert_clean(replies: dict[str, Any], *secrets: str) -> None:
    """No reply carries a server path or a library's internals; errors keep the project's shape."""
    for name, reply in replies.items():
        for secret in secrets:
            assert secret not in reply.text, (name, reply.text)
        for word in INTERNALS:
            assert word not in reply.text, (name, word, reply.text)
        if reply.status_code >= 400:
            assert set(reply.json()) == {"error"}, (name, reply.text)


def _assert_not_ready(replies: dict[str, Any], *reason_words: str) -> str:
    ready = replies["readyz"]
    assert ready.status_code == 503, ready.text
    assert ready.headers["Retry-After"]
    message: str = ready.json()["error"]["message"]
    for word in reason_words:
        assert word in message, message
    assert len(message) < 200, message  # a short reason
    for name in ("ask", "grade"):  # nothing is answered from a damaged index or model
        assert replies[name].status_code == 503, (name, replies[name].text)
    return message


# --- the index and its manifest --------------------------------------------------------------------


def test_a_flipped_byte_in_the_index_makes_the_service_not_ready(
        settings: Settings, fake_encoder: FakeEncoder, tmp_path: Path) -> None:
    ingest_with(settings, fake_encoder)
    index_file = _live_folder(settings) / INDEX_FILE
    # A byte of a stored vector: FAISS reads the file without complaint and answers with a wrong vector.
    _flip_byte(index_file, index_file.stat().st_size - 7)
    with _serving(settings, lambda _: fake_encoder) as client:
        replies = _bodies(client, settings)
    _assert_not_ready(replies, "index", "tutor ingest")
    _assert_clean(replies, str(tmp_path), str(settings.data_dir))


def test_a_truncated_index_makes_the_service_not_ready_without_faiss_errors(
        settings: Settings, fake_encoder: FakeEncoder, tmp_path: Path) -> None:
    ingest_with(settings, fake_encoder)
    index_file = _live_folder(settings) / INDEX_FILE
    index_file.write_bytes(index_file.read_bytes()[: index_file.stat().st_size // 2])
    with _serving(settings, lambda _: fake_encoder) as client:
        replies = _bodies(client, settings)
    _assert_not_ready(replies, "index", "tutor ingest")
    _assert_clean(replies, str(tmp_path), str(settings.data_dir))


def test_an_edited_manifest_makes_the_service_not_ready(
        settings: Settings, fake_encoder: FakeEncoder, tmp_path: Path) -> None:
    ingest_with(settings, fake_encoder)
    manifest_file = _live_folder(settings) / MANIFEST_FILE
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    rows = manifest["entries"]
    rows[0][0], rows[-1][0] = rows[-1][0], rows[0][0]  # two vectors now stand for each other's question
    manifest_file.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    with _serving(settings, lambda _: fake_encoder) as client:
        replies = _bodies(client, settings)
    _assert_not_ready(replies, "manifest", "tutor ingest")
    _assert_clean(replies, str(tmp_path), str(settings.data_dir))


def test_an_edited_count_in_the_manifest_is_caught(
        settings: Settings, fake_encoder: FakeEncoder, tmp_path: Path) -> None:
    ingest_with(settings, fake_encoder)
    manifest_file = _live_folder(settings) / MANIFEST_FILE
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    count = manifest["count"]
    manifest["count"] = count - 1
    manifest_file.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    with _serving(settings, lambda _: fake_encoder) as client:
        replies = _bodies(client, settings)
    message = _assert_not_ready(replies, "manifest")
    assert f"{count} vectors for {count} entries" not in message  # never a count that contradicts itself
    _assert_clean(replies, str(tmp_path), str(settings.data_dir))


def test_an_index_with_fewer_vectors_than_entries_says_both_numbers(
        settings: Settings, fake_encoder: FakeEncoder, tmp_path: Path) -> None:
    ingest_with(settings, fake_encoder)
    version, folder = _live_version(settings), _live_folder(settings)
    loaded = load_index(settings.index_path, version, fake_encoder.model_id, fake_encoder.dim)
    n = len(loaded.entries)
    vectors = loaded.vectors_at(list(range(n)))
    shutil.rmtree(folder)
    # The same version (same entries), written whole, but with one vector missing from the index file.
    assert write_index(settings.index_path, fake_encoder.model_id, fake_encoder.dim, loaded.entries,
                       vectors[:-1]) == version
    with _serving(settings, lambda _: fake_encoder) as client:
        replies = _bodies(client, settings)
    message = _assert_not_ready(replies)
    assert f"{n - 1} vectors for {n} entries" in message
    _assert_clean(replies, str(tmp_path), str(settings.data_dir))


def test_a_manifest_whose_count_disagrees_with_its_entries_says_both_numbers(tmp_path: Path) -> None:
    from ingest.index import IndexDamagedError, seal_manifest

    entries = [IndexEntry(f"q_{i}", "question", f"h{i}") for i in range(5)]
    vectors = np.eye(5, 8, dtype=np.float32)
    version = write_index(tmp_path, "m@1", 8, entries, vectors)
    manifest_file = version_dir(tmp_path, version) / MANIFEST_FILE
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    manifest["count"] = 4
    manifest_file.write_text(json.dumps(seal_manifest(manifest)), encoding="utf-8")  # edited, and sealed again
    with pytest.raises(IndexDamagedError) as refused:
        load_index(tmp_path, version, "m@1", 8)
    assert "4" in str(refused.value) and "5" in str(refused.value)
    assert "5 vectors for 5 entries" not in str(refused.value)
    assert str(tmp_path) not in str(refused.value)


def test_a_search_that_fails_at_query_time_answers_in_the_error_shape(
        settings: Settings, fake_encoder: FakeEncoder, tmp_path: Path) -> None:
    ingest_with(settings, fake_encoder)

    class Broken:
        """A FAISS index whose search fails the way FAISS does, naming a server file."""

        ntotal = 0

        def search(self, *_: object) -> None:
            raise RuntimeError(f"Error in faiss::read_index at {tmp_path}/index.faiss: bad")

        def reconstruct(self, *_: object) -> None:
            raise RuntimeError(f"Error in faiss::reconstruct at {tmp_path}/index.faiss: bad")

    with _serving(settings, lambda _: fake_encoder) as client:
        assert client.get("/readyz").status_code == 200
        runtime = client.app.state.runtime  # type: ignore[attr-defined]
        runtime.index.index = Broken()
        replies = _bodies(client, settings)
    assert replies["ask"].status_code == 503, replies["ask"].text
    assert replies["ask"].json()["error"]["code"] == "unavailable"
    _assert_clean(replies, str(tmp_path), str(settings.data_dir))


def test_an_intact_index_still_loads_and_records_its_hashes(settings: Settings, fake_encoder: FakeEncoder) -> None:
    ingest_with(settings, fake_encoder)
    manifest = json.loads((_live_folder(settings) / MANIFEST_FILE).read_text(encoding="utf-8"))
    assert len(manifest["index_sha256"]) == 64 and len(manifest["manifest_sha256"]) == 64
    with _serving(settings, lambda _: fake_encoder) as client:
        assert client.get("/readyz").status_code == 200


def test_ingesting_again_repairs_a_damaged_index(settings: Settings, fake_encoder: FakeEncoder) -> None:
    ingest_with(settings, fake_encoder)
    _flip_byte(_live_folder(settings) / INDEX_FILE, -7)
    assert ingest_with(settings, fake_encoder).unchanged == 42  # same bank, same version: the files are rewritten
    with _serving(settings, lambda _: fake_encoder) as client:
        assert client.get("/readyz").status_code == 200


# --- the int8 ONNX encoder -----------------------------------------------------------------------


def _tiny_onnx_encoder(folder: Path, model_id: str, dim: int) -> None:
    """An export-shaped encoder (manifest, tokenizer, ONNX graph) small enough to build in a test: the
    token embeddings of the bundled model's vocabulary, random, as the last hidden state."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    folder.mkdir(parents=True)
    shutil.copy(resolve_model_path(DEFAULT_MODEL) / "tokenizer.json", folder / "tokenizer.json")
    vocab = len(json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"])
    table = np.random.default_rng(0).normal(size=(vocab, dim)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["last_hidden_state"])],
        "tiny",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", dim])],
        [numpy_helper.from_array(table, "table")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(folder / ONNX_FILE))
    write_manifest(folder, {"model_id": model_id, "dim": dim, "max_length": 64})  # as `tutor models export` does


@pytest.fixture
def served_onnx(settings: Settings) -> tuple[Settings, Path]:
    """A bank ingested for the bundled model's id, with a tiny ONNX export where the service looks for one
    (TUTOR_ENCODER_BACKEND=auto: the service would fall back to PyTorch if there were none)."""
    model_id = model_id_for(settings.model)
    ingest_with(settings, FakeEncoder(dim=16, model_id=model_id))
    folder = encoder_dir(settings.index_path, model_id)
    _tiny_onnx_encoder(folder, model_id, 16)
    return settings.model_copy(update={"encoder_backend": "auto"}), folder


def test_the_tiny_export_serves(served_onnx: tuple[Settings, Path]) -> None:
    settings, _ = served_onnx
    with _serving(settings, default_encoder) as client:
        ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["backend"] == "onnx"


@pytest.mark.parametrize("damage", ["flip", "truncate", "tokenizer", "manifest"])
def test_a_damaged_onnx_encoder_makes_the_service_not_ready(
        served_onnx: tuple[Settings, Path], tmp_path: Path, damage: str) -> None:
    settings, folder = served_onnx
    model = folder / ONNX_FILE
    if damage == "flip":  # a weight: onnxruntime loads the model, and every vector is a little wrong
        _flip_byte(model, model.stat().st_size - 100)
    elif damage == "truncate":
        model.write_bytes(model.read_bytes()[:1000])
    elif damage == "tokenizer":
        tokenizer = folder / "tokenizer.json"
        tokenizer.write_text(tokenizer.read_text(encoding="utf-8").replace('"[CLS]"', '"[CLX]"'), encoding="utf-8")
    else:
        manifest = json.loads((folder / ENCODER_MANIFEST).read_text(encoding="utf-8"))
        manifest["max_length"] = 8
        (folder / ENCODER_MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    with _serving(settings, default_encoder) as client:
        replies = _bodies(client, settings)
    message = _assert_not_ready(replies, "encoder", "tutor models export")
    assert "PyTorch" not in message  # a damaged export is not served around
    _assert_clean(replies, str(tmp_path), str(settings.data_dir))


@pytest.mark.slow
def test_a_flipped_byte_in_the_real_int8_export_makes_the_service_not_ready(
        settings: Settings, onnx_encoder_dir: Path, tmp_path: Path) -> None:
    model_id = model_id_for(settings.model)
    ingest_with(settings, FakeEncoder(dim=384, model_id=model_id))
    with_onnx(settings.index_path, onnx_encoder_dir)  # a copy: the session's export stays whole
    model = encoder_dir(settings.index_path, model_id) / ONNX_FILE
    _flip_byte(model, model.stat().st_size // 2)
    with _serving(settings.model_copy(update={"encoder_backend": "auto"}), default_encoder) as client:
        replies = _bodies(client, settings)
    message = _assert_not_ready(replies, "encoder", "tutor models export")
    assert "PyTorch" not in message
    _assert_clean(replies, str(tmp_path), str(settings.data_dir))


# --- Redis ------------------------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_readyz_says_not_ready_when_the_rate_limit_redis_is_unreachable(
        settings: Settings, fake_encoder: FakeEncoder, tmp_path: Path) -> None:
    ingest_with(settings, fake_encoder)
    url = f"redis://:hunter2@127.0.0.1:{_closed_port()}/0"
    with _serving(settings.model_copy(update={"redis_url": url}), lambda _: fake_encoder) as client:
        ready = client.get("/readyz")
        grade = client.post("/v1/grade", headers={"X-API-Key": _api_key(settings)},
                            json={"question": "What does all-gather do?", "reference_answers": ["every shard"],
                                  "answer": "all the pieces"})
    assert ready.status_code == 503 and ready.headers["Retry-After"]
    assert "Redis" in ready.json()["error"]["message"]
    assert grade.status_code == 503  # rate limits fail closed
    for reply in (ready, grade):
        assert "hunter2" not in reply.text and str(tmp_path) not in reply.text


def test_readyz_is_ready_without_redis_configured(settings: Settings, fake_encoder: FakeEncoder) -> None:
    ingest_with(settings, fake_encoder)
    with _serving(settings, lambda _: fake_encoder) as client:
        assert client.get("/readyz").status_code == 200


# --- load-time cost ----------------------------------------------------------------------------------


def test_hashing_at_load_is_cheap(tmp_path: Path) -> None:
    """A 20 000-vector index (384 dimensions, 31 MB) is checked and loaded in well under a second
    (measured: about 50 ms, of which the checks take about 25)."""
    import time

    n, dim = 20_000, 384
    entries = [IndexEntry(f"q_{i}", "question", f"h{i}") for i in range(n)]
    vectors = np.random.default_rng(0).normal(size=(n, dim)).astype(np.float32)
    version = write_index(tmp_path, "m@1", dim, entries, vectors)
    start = time.perf_counter()
    loaded = load_index(tmp_path, version, "m@1", dim)
    assert time.perf_counter() - start < 2.0  # generous: shared CI machines
    assert loaded.index.ntotal == n
