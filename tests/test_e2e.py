"""End to end through real HTTP with the real model: a learner's quiz, and two API processes on PostgreSQL."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import pg_schema, with_onnx
from tests.serving import run_tutor, serving

pytestmark = pytest.mark.slow


def _env(data_dir: Path, db_url: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TUTOR_")}
    env["TUTOR_DATA_DIR"] = str(data_dir)
    if db_url:
        env["TUTOR_DATABASE_URL"] = db_url
    return env


@pytest.fixture(scope="module")
def bank_dir(tmp_path_factory: pytest.TempPathFactory, onnx_encoder_dir: Path) -> Path:
    import shutil

    from tests.conftest import ROOT, SEEDS

    data = tmp_path_factory.mktemp("e2e") / "data"
    shutil.copytree(SEEDS, data / "raw")
    shutil.copytree(ROOT / "data" / "notes", data / "notes")
    for name in ("taxonomy.yaml", "annotations.yaml"):
        shutil.copy(ROOT / "data" / name, data / name)
    with_onnx(data / "index", onnx_encoder_dir)
    with_onnx(data / "pg-index", onnx_encoder_dir)
    return data


@pytest.fixture(scope="module")
def sqlite_server(bank_dir: Path) -> Iterator[tuple[str, dict[str, dict[str, Any]]]]:
    env = _env(bank_dir)
    run_tutor(env, "ingest")
    bank = {item["id"]: item for item in json.loads(run_tutor(env, "bank", "list", "--json").stdout)}
    with serving(env) as base:
        yield base, bank


def test_a_learner_answers_ten_questions(sqlite_server: tuple[str, dict[str, dict[str, Any]]]) -> None:
    base, bank = sqlite_server
    http = httpx.Client(base_url=base, timeout=30)
    learner = http.post("/v1/learners", json={"display_name": "e2e"}).json()["id"]
    sid = http.post("/v1/sessions", json={"learner_id": learner, "length": 10, "mode": "adaptive"}).json()["id"]
    expected = {}
    for i in range(10):
        nxt = http.get(f"/v1/sessions/{sid}/next").json()
        assert nxt["done"] is False, nxt
        q = bank[nxt["question"]["id"]]
        right = i % 2 == 0
        if right:
            answer = q["accepted_answers"][0]
        elif q["wrong_options"]:
            answer = q["wrong_options"][0]
        else:
            # Off the subject altogether, and sharing no word with any bank question. (A GPU-flavoured
            # wrong answer such as "it makes the GPU fans spin faster", or one that shares a single word
            # with a question, "Sourdough needs a long, slow fermentation", is graded partial on some
            # questions without wrong options: a known weakness, docs/GRADING.md, not what this flow
            # test checks; tests/app/grading/test_dev_regression.py holds both answers to every question.)
            answer = "The capital of France is Paris."
        res = http.post(
            f"/v1/sessions/{sid}/answers",
            json={"question_id": q["id"], "answer": answer},
            headers={"Idempotency-Key": f"e2e-{i}"},
        )
        assert res.status_code == 200, res.text
        result = res.json()
        expected[q["id"]] = result["verdict"]
        assert result["verdict"] == ("correct" if right else "incorrect"), (answer, result)
        assert result["citation"]["file"] == q["source"]["file"]
        explanation = result["explanation"]
        if q["explanation"]:
            assert explanation["kind"] == "own" and explanation["text"] == q["explanation"]
        else:  # the study notes explain it, never another question's material
            assert explanation["kind"] == "notes" and explanation["source"]["file"].endswith(".md")
            assert explanation["note"] and "question_id" not in explanation
        assert explanation["passages"] and all(p["file"].endswith(".md") for p in explanation["passages"])
        due = datetime.fromisoformat(result["schedule"]["due"])
        assert due > datetime.now(UTC)
        assert result["progress"]["answered"] == i + 1
    assert http.get(f"/v1/sessions/{sid}/next").json()["done"] is True
    progress = http.get(f"/v1/learners/{learner}/progress").json()
    assert progress["answered"] == 10 and progress["correct"] == 5
    assert {h["question_id"]: h["verdict"] for h in progress["history"]} == expected
    assert any(m["mastery"] > 0 for m in progress["mastery"])


def test_a_bank_answer_is_read_by_both_judges_as_served(sqlite_server: tuple[str, dict[str, dict[str, Any]]],
                                                        bank_dir: Path) -> None:
    """The int8 encoder keeps the late judge's layer states, so a bank question's answer in other words
    is weighed by the bank decision, with both judges' readings (app/grading/decision.py)."""
    _, bank = sqlite_server
    (qid,) = [k for k, v in bank.items() if v["question"].startswith("In pipeline parallelism, what is a 'micro")]
    answer = ("In short: micro-batches let neighbouring stages work on different slices of the batch at once, so "
              "the pipeline stays busy")  # the lead-in is cut before either judge reads it
    body = json.loads(run_tutor(_env(bank_dir), "grade", answer, "--question-id", qid).stdout)
    assert "pair-judge" in body["grader_version"] and "late-judge" in body["grader_version"], body
    assert body["verdict"] == "correct", body


def test_ask_answers_from_the_notes_and_declines_the_rest(sqlite_server: tuple[str, dict[str, dict[str, Any]]]) -> None:
    base, _ = sqlite_server
    answered = httpx.post(f"{base}/v1/ask", json={"text": "what does reduce-scatter do in FSDP?"}).json()
    assert answered["answered"] is True
    top = answered["passages"][0]
    assert top["file"].endswith(".md") and "reduce-scatter" in top["text"].lower()
    assert top["source"]["section"] and top["source"]["lines"][0] <= top["source"]["lines"][1]
    declined = httpx.post(f"{base}/v1/ask", json={"text": "how do I bake sourdough bread"}).json()
    assert declined["answered"] is False and declined["passages"] == []
    assert "notes don't cover" in declined["text"] and declined["nearest_topics"]


@pytest.fixture
def pg_url(postgres_available: bool) -> Iterator[str]:
    if not postgres_available:
        pytest.skip("no PostgreSQL")
    with pg_schema("e2e") as url:
        yield url


def test_two_processes_on_postgres_count_each_answer_once(bank_dir: Path, pg_url: str) -> None:
    env = _env(bank_dir, pg_url)
    env["TUTOR_INDEX_DIR"] = str(bank_dir / "pg-index")
    run_tutor(env, "ingest")
    with serving(env) as one, serving(env) as two:
        learner = httpx.post(f"{one}/v1/learners", json={}).json()["id"]
        sid = httpx.post(f"{two}/v1/sessions", json={"learner_id": learner, "length": 3}).json()["id"]
        q = httpx.get(f"{one}/v1/sessions/{sid}/next").json()["question"]
        body = {"question_id": q["id"], "answer": "each rank ends up with a different piece"}

        def post(args: tuple[str, str]) -> httpx.Response:
            base, key = args
            return httpx.post(
                f"{base}/v1/sessions/{sid}/answers", json=body, headers={"Idempotency-Key": key}, timeout=60
            )

        jobs = [(one, "same"), (two, "same"), (one, "same"), (two, "same"), (one, "other"), (two, "third")]
        with ThreadPoolExecutor(len(jobs)) as pool:
            responses = list(pool.map(post, jobs))
        same = [r for (_, key), r in zip(jobs, responses, strict=True) if key == "same"]
        others = [r for (_, key), r in zip(jobs, responses, strict=True) if key != "same"]
        ok = [r for r in responses if r.status_code == 200]
        assert {r.json()["attempt_id"] for r in ok} == {ok[0].json()["attempt_id"]}  # one attempt, however asked
        assert all(r.status_code in (200, 409) for r in responses), [r.text for r in responses]
        if all(r.status_code == 200 for r in same):
            assert all(r.status_code == 409 for r in others)
        progress = httpx.get(f"{two}/v1/learners/{learner}/progress").json()
        assert progress["answered"] == 1
        assert httpx.get(f"{one}/v1/sessions/{sid}/next").json()["progress"]["answered"] == 1
