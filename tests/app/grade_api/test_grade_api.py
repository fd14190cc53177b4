"""The public grading API: keys, limits, bank / inline / rubric forms, batches, usage and storage."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.db import make_engine, make_sessionmaker, transaction
from app.grade_api.endpoints import GradingResponse
from app.grading.examples import load_head
from app.keys.service import usage
from app.models import Attempt


def _stored(client: TestClient) -> None:
    """Move what the attempt journal holds into the database (a read of the API's attempts sees them)."""
    journal = client.app.state.runtime.journal  # type: ignore[attr-defined]
    if journal is not None:
        assert journal.flush()


def _without_journal(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each call commits before it answers, through the group writer (TUTOR_JOURNAL=false)."""
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    runtime.journal.close()
    monkeypatch.setattr(runtime, "journal", None)


def _usage(client: TestClient, key_id: str) -> dict[str, tuple[int, int]]:
    """The key's (calls, items) per endpoint, as stored."""
    _stored(client)
    settings = client.app.state.runtime.settings  # type: ignore[attr-defined]
    engine = make_engine(settings.db_url)
    with transaction(make_sessionmaker(engine)) as s:
        rows = {r.endpoint: (r.calls, r.items) for r in usage(s, key_id)}
    engine.dispose()
    return rows


def _count(client: TestClient, **where: str) -> int:
    _stored(client)
    settings = client.app.state.runtime.settings  # type: ignore[attr-defined]
    engine = make_engine(settings.db_url)
    with transaction(make_sessionmaker(engine)) as s:
        query = select(func.count()).select_from(Attempt)
        for name, value in where.items():
            query = query.where(getattr(Attempt, name) == value)
        n = int(s.scalar(query) or 0)
    engine.dispose()
    return n


def _at_once(n: int, call: Callable[[int], int]) -> list[int]:
    """`call(i)` for i < n, each on its own thread, all started together; their status codes."""
    codes: list[int] = []
    threads = [threading.Thread(target=lambda i=i: codes.append(call(i))) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return codes


INLINE = {
    "question": "What does all-gather do?",
    "reference_answers": ["Every rank ends with the concatenation of all ranks' chunks"],
    "wrong_answers": ["It sums the tensors and sends the sum to every rank"],
}


def test_keys_are_required(client: TestClient) -> None:
    body = {**INLINE, "answer": "everyone gets all chunks"}
    missing = client.post("/v1/grade", json=body)
    assert missing.status_code == 401 and missing.json()["error"]["code"] == "unauthorized"
    wrong = client.post("/v1/grade", json=body, headers={"X-API-Key": "gt_not-a-real-key"})
    assert wrong.status_code == 401


def test_inline_question_not_in_the_bank(client: TestClient, make_key: Callable[..., tuple[str, str]]) -> None:
    key_id, secret = make_key()
    res = client.post("/v1/grade", json={**INLINE, "answer": INLINE["wrong_answers"][0]}, headers={"X-API-Key": secret})
    assert res.status_code == 200, res.text
    data = res.json()
    assert data["verdict"] == "incorrect" and data["matched_misconception"] == INLINE["wrong_answers"][0]
    assert data["model"] and data["grader_version"]
    assert _count(client, api_key_id=key_id) == 1


def test_bank_question_gets_the_grounded_result(client: TestClient, make_key: Callable[..., tuple[str, str]]) -> None:
    _, secret = make_key()
    qid = client.get("/v1/questions", params={"q": "reduce-scatter"}).json()["items"][0]["id"]
    res = client.post("/v1/grade", json={"question_id": qid, "answer": "no clue"}, headers={"X-API-Key": secret})
    data = res.json()
    assert data["verdict"] == "incorrect" and data["citation"]["number"] == 9
    missing = client.post("/v1/grade", json={"question_id": "q_nope", "answer": "x"}, headers={"X-API-Key": secret})
    assert missing.status_code == 404


def test_rubric_once_then_grade_by_id(client: TestClient, make_key: Callable[..., tuple[str, str]]) -> None:
    _, secret = make_key()
    _, other = make_key()
    created = client.post(
        "/v1/rubrics",
        json={**INLINE, "examples": [{"answer": "all of them", "label": "partial"}]},
        headers={"X-API-Key": secret},
    )
    assert created.status_code == 201, created.text
    rid = created.json()["rubric_id"]
    res = client.post(
        "/v1/grade", json={"rubric_id": rid, "answer": INLINE["reference_answers"][0]}, headers={"X-API-Key": secret}
    )
    assert res.json()["verdict"] == "correct"
    assert client.get(f"/v1/rubrics/{rid}", headers={"X-API-Key": secret}).json()["question"] == INLINE["question"]
    assert client.get(f"/v1/rubrics/{rid}", headers={"X-API-Key": other}).status_code == 404
    assert (
        client.post("/v1/grade", json={"rubric_id": rid, "answer": "x"}, headers={"X-API-Key": other}).status_code
        == 404
    )


LABELLED = [  # enough labelled examples, of both kinds, for the example head
    *({"answer": f"each rank ends up holding every rank's chunk {i}", "label": "correct"} for i in range(5)),
    *({"answer": f"it adds the tensors together on rank {i}", "label": "incorrect"} for i in range(5)),
]


def test_labelled_examples_keep_the_response_shape(
    client: TestClient, make_key: Callable[..., tuple[str, str]]
) -> None:
    _, secret = make_key()
    headers = {"X-API-Key": secret}
    answer = "every rank gets all the chunks"
    plain = client.post("/v1/grade", json={**INLINE, "answer": answer}, headers=headers).json()
    taught = client.post("/v1/grade", json={**INLINE, "examples": LABELLED, "answer": answer}, headers=headers)
    assert taught.status_code == 200, taught.text
    head = f"+{load_head().version}"  # the example head's version ends what it graded
    assert set(taught.json()) == set(plain) and taught.json()["grader_version"].endswith(head)
    assert head not in plain["grader_version"]
    # A registered rubric keeps its examples: graded by id, the head reads them too.
    rid = client.post("/v1/rubrics", json={**INLINE, "examples": LABELLED}, headers=headers).json()["rubric_id"]
    by_id = client.post("/v1/grade", json={"rubric_id": rid, "answer": answer}, headers=headers).json()
    assert by_id["grader_version"] == taught.json()["grader_version"] and by_id["verdict"] == taught.json()["verdict"]


def test_batch_grades_many_with_per_item_errors(client: TestClient, make_key: Callable[..., tuple[str, str]]) -> None:
    key_id, secret = make_key()
    items = [{**INLINE, "answer": f"answer number {i}"} for i in range(30)]
    items.append({"question_id": "q_nope", "answer": "x"})
    res = client.post("/v1/grade/batch", json={"items": items}, headers={"X-API-Key": secret})
    assert res.status_code == 200, res.text
    results = res.json()["results"]
    assert len(results) == 31 and results[-1]["error"]["code"] == "not_found"
    assert all(r["verdict"] in {"correct", "partial", "incorrect"} for r in results[:-1])
    too_many = client.post("/v1/grade/batch", json={"items": items * 4}, headers={"X-API-Key": secret})
    assert too_many.status_code == 422
    assert _usage(client, key_id)["grade/batch"] == (1, 31)


def test_rate_limit_answers_429_with_retry_after(client: TestClient, make_key: Callable[..., tuple[str, str]]) -> None:
    _, secret = make_key(rate_limit="2/minute")
    body = {**INLINE, "answer": "everyone gets every chunk"}
    codes = [client.post("/v1/grade", json=body, headers={"X-API-Key": secret}).status_code for _ in range(2)]
    limited = client.post("/v1/grade", json=body, headers={"X-API-Key": secret})
    assert codes == [200, 200] and limited.status_code == 429
    assert int(limited.headers["Retry-After"]) >= 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"answer": "x"}, ""),
        ({**INLINE, "answer": ""}, "answer"),
        ({**INLINE, "answer": "x" * 2001}, "answer"),
        ({"question": "Q?", "answer": "x"}, ""),
        ({**INLINE, "reference_answers": "not a list", "answer": "x"}, "reference_answers"),
        ({"question_id": "q", "rubric_id": "r", "answer": "x"}, ""),
        ({**INLINE, "answer": "x", "unexpected": 1}, "unexpected"),
    ],
)
def test_bad_grade_requests(
    client: TestClient, make_key: Callable[..., tuple[str, str]], body: dict, field: str
) -> None:
    _, secret = make_key()
    res = client.post("/v1/grade", json=body, headers={"X-API-Key": secret})
    assert res.status_code == 422, res.text
    fields = [f["field"] for f in res.json()["error"]["details"]["fields"]]
    assert any(field in f for f in fields)


def test_batch_body_limit_is_one_megabyte(client: TestClient, make_key: Callable[..., tuple[str, str]]) -> None:
    _, secret = make_key()
    big = {"items": [{**INLINE, "answer": "y" * 1999}] * 100}
    res = client.post("/v1/grade/batch", json=big, headers={"X-API-Key": secret})
    assert res.status_code == 200  # ~200 KB: over 64 KB but allowed for batches
    huge = client.post(
        "/v1/grade/batch",
        content=b"x" * (1024 * 1024 + 10),
        headers={"X-API-Key": secret, "content-type": "application/json"},
    )
    assert huge.status_code == 413 and "1024 KB" in huge.json()["error"]["message"]
    single = client.post(
        "/v1/grade", content=b"x" * 70_000, headers={"X-API-Key": secret, "content-type": "application/json"}
    )
    assert single.status_code == 413


def test_author_key_sees_answers(client: TestClient, make_key: Callable[..., tuple[str, str]]) -> None:
    _, author = make_key(scopes=("grade", "author"))
    _, grader = make_key()
    qid = client.get("/v1/questions").json()["items"][0]["id"]
    assert "accepted_answers" not in client.get(f"/v1/questions/{qid}").json()
    assert client.get(f"/v1/questions/{qid}?include=answers").status_code == 403
    assert client.get(f"/v1/questions/{qid}?include=answers", headers={"X-API-Key": grader}).status_code == 403
    full = client.get(f"/v1/questions/{qid}?include=answers", headers={"X-API-Key": author}).json()
    assert full["accepted_answers"]


def test_grounded_material_is_found_once_per_bank_version(
    client: TestClient, make_key: Callable[..., tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.answers import grounding

    calls: list[str] = []
    real = grounding.related_questions

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append("related")
        return real(*args, **kwargs)

    monkeypatch.setattr(grounding, "related_questions", counting)
    grounding.MATERIAL.clear()
    _, secret = make_key()
    qid = client.get("/v1/questions", params={"q": "reduce-scatter"}).json()["items"][0]["id"]
    first, second = (
        client.post("/v1/grade", json={"question_id": qid, "answer": answer}, headers={"X-API-Key": secret}).json()
        for answer in ("no clue", "it scatters reduced chunks")
    )
    assert calls == ["related"]
    assert first["related_questions"] == second["related_questions"] and first["related_questions"]
    assert first["explanation"] == second["explanation"]


def test_concurrent_calls_are_each_stored_and_counted(
    client: TestClient, make_key: Callable[..., tuple[str, str]]
) -> None:
    """The group writer applies concurrent calls together; no attempt or count may go missing."""
    key_id, secret = make_key()
    qid = client.get("/v1/questions", params={"q": "reduce-scatter"}).json()["items"][0]["id"]

    def call(i: int) -> int:
        if i % 3:
            res = client.post("/v1/grade", json={"question_id": qid, "answer": f"chunks of the sum {i}"},
                              headers={"X-API-Key": secret})
        else:
            res = client.post("/v1/grade/batch", json={"items": [{"question_id": qid, "answer": f"a {i}"},
                                                                 {**INLINE, "answer": f"b {i}"}]},
                              headers={"X-API-Key": secret})
        return res.status_code

    assert _at_once(24, call) == [200] * 24
    assert _usage(client, key_id) == {"grade": (16, 16), "grade/batch": (8, 16)}
    assert _count(client, api_key_id=key_id) == 16 + 16


def test_concurrent_calls_after_the_caches_expire_read_the_key_and_the_question_once(
    client: TestClient, make_key: Callable[..., tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests that miss the same expired entry together share one read of it (and all succeed)."""
    import app.keys.deps as deps
    from app.answers.cache import BankCache

    _, secret = make_key()
    qid = client.get("/v1/questions", params={"q": "reduce-scatter"}).json()["items"][0]["id"]
    reads = {"key": 0, "question": 0}
    authenticate, load = deps.authenticate, BankCache.load

    def slow_authenticate(*args: object, **kwargs: object) -> object:
        reads["key"] += 1
        time.sleep(0.3)  # long enough for every caller below to arrive while it runs
        return authenticate(*args, **kwargs)  # type: ignore[arg-type]

    def slow_load(self: BankCache, *args: object, **kwargs: object) -> object:
        reads["question"] += 1
        time.sleep(0.3)
        return load(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(deps, "authenticate", slow_authenticate)
    monkeypatch.setattr(BankCache, "load", slow_load)
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    runtime.callers.clear()
    runtime.questions.clear()

    def call(i: int) -> int:
        return client.post("/v1/grade", json={"question_id": qid, "answer": f"chunks of the sum {i}"},
                           headers={"X-API-Key": secret}).status_code

    assert _at_once(12, call) == [200] * 12
    assert reads == {"key": 1, "question": 1}
    assert len(runtime.key_reads) == 0 and len(runtime.question_reads) == 0  # nothing left behind


def test_concurrent_batches_read_each_bank_question_once(
    client: TestClient, make_key: Callable[..., tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batch calls that miss the same bank questions together share their reads, unknown ids included."""
    from app.answers.cache import BankCache

    _, secret = make_key()
    qids = [q["id"] for q in client.get("/v1/questions", params={"q": "pipeline"}).json()["items"][:3]]
    reads: list[str] = []
    load = BankCache.load

    def slow_load(self: BankCache, session: object, index: object, book: object, question_id: str) -> object:
        reads.append(question_id)
        time.sleep(0.2)  # long enough for the other batches to arrive while it runs
        return load(self, session, index, book, question_id)  # type: ignore[arg-type]

    monkeypatch.setattr(BankCache, "load", slow_load)
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    runtime.questions.clear()
    items = [{"question_id": q, "answer": "stages run micro-batches in turn"} for q in [*qids, "q_nope"]]
    results: list[list[dict[str, object]]] = []

    def call(i: int) -> int:
        res = client.post("/v1/grade/batch", json={"items": items}, headers={"X-API-Key": secret})
        results.append(res.json()["results"])
        return res.status_code

    assert len(qids) == 3
    assert _at_once(4, call) == [200] * 4
    assert sorted(reads) == sorted([*qids, "q_nope"])  # each once, for all four batches
    for batch in results:
        assert [r.get("verdict") is not None for r in batch] == [True, True, True, False]
        assert batch[3]["error"]["code"] == "not_found"  # type: ignore[index]
    assert len(runtime.question_reads) == 0


@pytest.mark.parametrize("journal", ["journal", "no journal"])
@pytest.mark.parametrize("way", ["on the worker", "worker grades, writer busy", "on the loop"])
def test_a_lone_grade_is_stored_and_counted_whichever_thread_finishes_it(
    client: TestClient, make_key: Callable[..., tuple[str, str]], monkeypatch: pytest.MonkeyPatch, way: str,
    journal: str
) -> None:
    """A lone request is graded and stored (journaled, or committed when the writer is idle) on the
    encoder's worker; under load the loop grades and stores. The answer is the same."""
    from app.grade_api import endpoints

    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    if journal == "no journal":
        _without_journal(client, monkeypatch)
    ran: list[str] = []
    real_encode_then = endpoints.encode_then

    async def tracking(encoder: object, texts: list[str], then: Callable[..., object], timeout_s: float) -> object:
        outcome = await real_encode_then(encoder, texts, then, timeout_s)  # type: ignore[arg-type]
        ran.append(type(outcome).__name__)
        return outcome

    monkeypatch.setattr(endpoints, "encode_then", tracking)
    if way == "worker grades, writer busy":
        monkeypatch.setattr(runtime.writer, "write_if_idle", lambda write: False)
    if way == "on the loop":  # as if the request had batch-mates: the future holds plain vectors
        async def vectors_only(encoder: object, texts: list[str], then: Callable[..., object], timeout_s: float
                               ) -> object:
            from app.serving.aio import encode

            ran.append("ndarray")
            return await encode(encoder, texts)  # type: ignore[arg-type]

        monkeypatch.setattr(endpoints, "encode_then", vectors_only)
    key_id, secret = make_key()
    body = {**INLINE, "answer": "every rank ends up holding all the chunks"}  # free text: it needs an encode
    res = client.post("/v1/grade", json=body, headers={"X-API-Key": secret})
    assert res.status_code == 200, res.text
    data = res.json()
    assert data["verdict"] in {"correct", "partial", "incorrect"} and data["matched_answer"] is not None
    assert ran == (["ndarray"] if way == "on the loop" else ["Continued"])
    assert _count(client, api_key_id=key_id, id=data["attempt_id"]) == 1
    assert _usage(client, key_id) == {"grade": (1, 1)}


def test_a_lone_grade_whose_commit_hangs_answers_503_in_time(
    client: TestClient, make_key: Callable[..., tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = client.app.state.runtime  # type: ignore[attr-defined]
    _without_journal(client, monkeypatch)
    release = threading.Event()

    def hanging(write: object) -> bool:  # the database stops answering mid-commit
        release.wait(10)
        return False

    monkeypatch.setattr(runtime.writer, "write_if_idle", hanging)
    monkeypatch.setattr(runtime.writer, "timeout_s", 0.3)
    _, secret = make_key()
    body = {**INLINE, "answer": "every rank ends up holding all the chunks"}
    res = client.post("/v1/grade", json=body, headers={"X-API-Key": secret})
    release.set()
    assert res.status_code == 503 and res.headers["Retry-After"] == "5"
    assert res.json()["error"]["code"] == "unavailable"


def test_grading_responses_render_the_same_json_values_and_never_invalid_json() -> None:
    content = {"verdict": "correct", "score": 0.9731, "tiny": 1e-05, "flags": [], "feedback": "Ring — 2(N−1)/N ✓",
               "nested": {"n": 3, "none": None, "ok": True}}
    res = GradingResponse(content)
    assert json.loads(res.body) == content and res.headers["content-type"] == "application/json"
    assert int(res.headers["content-length"]) == len(res.body)
    assert json.loads(GradingResponse({"score": float("nan")}).body) == {"score": None}
