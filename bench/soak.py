"""Soak test: two API processes on PostgreSQL + Redis under 64 clients, one of them killed (SIGKILL) mid-run.

Every attempt the API acknowledges must reach the database exactly once, whichever process took it and
whether or not that process was killed before its attempt journal (app/serving/journal.py) reached the
database, and the processes' resident memory must stay flat. Run it with `make soak` (about 7 minutes
with the preparation); it is not part of the CI tests.

What it does:

- copies the project's data into a temporary folder, creates a fresh PostgreSQL database (dropped at the
  end) and picks an empty Redis database (flushed at the end), ingests the bank there and creates an API
  key with a rate limit no load reaches;
- starts two `tutor serve` processes on that same data folder (they share the attempt journal's folder,
  as the processes of one deployment do) and drives them with `--clients` client threads for
  `--seconds`, spread over both. Each client has a home process and turns to the other when its home
  refuses connections, until a health check finds the home ready again (a load balancer's behaviour);
- grading clients post POST /v1/grade to open-answer bank questions with answers from data/eval/dev.jsonl, each
  answer ending with a unique marker so that its attempt can be found in the database. A 200 with an
  `attempt_id` is an acknowledgement; a request is never sent again (the grading API has no
  idempotency key), so a request cut by the kill may or may not have been stored;
- quiz clients (`--quiz-share` of them) answer quiz sessions (POST /v1/sessions/{id}/answers) with an
  Idempotency-Key, and retry an answer with the same key, on either process, until it is acknowledged:
  a retry of an answer stored before the kill must be replayed, not stored again;
- at `--kill-at` of the run one process gets SIGKILL; it is started again `--restart-after` seconds later
  on the same port, and takes load again once ready (what its journal held is stored by then);
- every 5 s it samples each process's resident memory (RSS);
- after the run, it waits for both processes' journals to drain (/readyz `journal_pending` 0, no
  journal segment left) and counts the attempts in the database.

Pass: no acknowledged attempt lost, none stored twice, no attempt stored for a request that was
answered with an error, no stored attempt that no client sent, the key's usage counter equal to its
stored attempts, every quiz answer acknowledged in the end, and each process's RSS within
`--rss-tolerance` of its value one minute in (for the restarted process, one minute after its restart)
for the rest of its life. Exit status 1 otherwise. Only a request whose connection dropped at the kill
may be stored without an acknowledgement (its client could not know the outcome); those are counted
and reported.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import psutil
import psycopg
import redis
from common import ROOT, bench_env, copy_project_data, dev_answers, percentiles
from psycopg import sql
from sqlalchemy.engine import make_url

from tests.serving import TUTOR, free_port, run_tutor, wait_ready

SAMPLE_S = 5.0  # RSS sampling period
PROBE_S = 0.5  # how often the health check probes a process marked down
QUIZ_LENGTH = 20  # questions per quiz session
QUIZ_GRACE_S = 60.0  # after the run, how long a quiz client keeps retrying its unacknowledged answer
DRAIN_TIMEOUT_S = 180.0
REQUEST_TIMEOUT_S = 60.0
# Idle keep-alive connections are dropped by the client before uvicorn's 5 s timeout closes them, so that no
# request is sent on a connection the server is closing at that moment (a client's race, not the service's).
CLIENT_LIMITS = httpx.Limits(keepalive_expiry=2.0)
# Errors of the connection itself: the process behind it is gone (or going), so the client turns to the other.
CONNECTION_ERRORS = (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


# -- the services the API runs on --------------------------------------------------------------------------------


@contextlib.contextmanager
def postgres_database(admin_url: str) -> Iterator[tuple[str, str]]:
    """A new PostgreSQL database, dropped at the end; yields (its SQLAlchemy URL, its psycopg conninfo)."""
    admin = make_url(admin_url)
    name = f"soak_{secrets.token_hex(6)}"
    conninfo = _conninfo(admin_url, admin.database or "postgres")
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = admin.set(drivername="postgresql+psycopg", database=name).render_as_string(hide_password=False)
    try:
        yield url, _conninfo(admin_url, name)
    finally:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _conninfo(url: str, database: str) -> str:
    u = make_url(url)
    parts = {"host": u.host or "127.0.0.1", "port": str(u.port or 5432), "user": u.username or "postgres",
             "dbname": database}
    if u.password:
        parts["password"] = u.password
    return " ".join(f"{k}={v}" for k, v in parts.items())


@contextlib.contextmanager
def redis_database(base_url: str, number: int | None) -> Iterator[str]:
    """An empty Redis database (one of 1-14 at random unless `number` is given), flushed at the end."""
    base = base_url.rstrip("/")
    if number is None:
        candidates = list(range(1, 15))  # 0 is the default one, 15 the tests'
        random.shuffle(candidates)
        for n in candidates:
            with redis.Redis.from_url(f"{base}/{n}") as r:
                if r.dbsize() == 0:
                    number = n
                    break
        else:
            raise RuntimeError(f"no empty Redis database among 1-14 at {base}; pass --redis-db")
    url = f"{base}/{number}"
    try:
        yield url
    finally:
        with redis.Redis.from_url(url) as r:
            r.flushdb()


def prepare_data(folder: Path, env: dict[str, str]) -> None:
    """The project's data (`common.copy_project_data`) in `folder`, ingested into env's database."""
    copy_project_data(folder)
    run_tutor(env, "ingest")


def create_key(env: dict[str, str]) -> tuple[str, str]:
    """(key id, secret) of a new API key with a rate limit no load reaches."""
    out = run_tutor(env, "keys", "create", "soak", "--rate-limit", "1000000/minute").stdout
    key_id = re.search(r"key id: (\S+)", out)
    secret = re.search(r"secret: (\S+)", out)
    if key_id is None or secret is None:
        raise RuntimeError(f"unexpected output of tutor keys create: {out!r}")
    return key_id.group(1), secret.group(1)


# -- the API processes ---------------------------------------------------------------------------------------------


@dataclass
class Life:
    """One process's life: its pid, when it started and was ready, and its RSS samples."""

    name: str
    pid: int
    started: float  # seconds since the load began (negative: before it)
    ready: float | None = None
    ended: float | None = None
    killed: bool = False
    rss_mb: list[tuple[float, float]] = field(default_factory=list)  # (seconds since the load began, MB)


class Server:
    """A `tutor serve` process on a fixed port; it can be killed and started again on the same port."""

    def __init__(self, name: str, env: dict[str, str], logs: Path, clock: Clock) -> None:
        self.name = name
        self.env = env
        self.logs = logs
        self.clock = clock
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.lives: list[Life] = []
        self._log: IO[bytes] | None = None
        self.healthy = False  # takes load; clients clear it when a connection fails, the health check sets it

    def start(self) -> None:
        path = self.logs / f"{self.name}-{len(self.lives) + 1}.log"
        self._log = path.open("wb")
        self.proc = subprocess.Popen([*TUTOR, "serve", "--port", str(self.port)], env=self.env, cwd=ROOT,
                                     stdout=self._log, stderr=subprocess.STDOUT)
        self.lives.append(Life(f"{self.name}#{len(self.lives) + 1}", self.proc.pid, self.clock.now()))

    def wait_ready(self, timeout: float = 300) -> None:
        proc = self.proc
        assert proc is not None
        wait_ready(self.base, timeout, lambda: None if proc.poll() is None else f"{self.name} exited", poll_s=0.2)
        self.lives[-1].ready = self.clock.now()
        self.healthy = True

    def kill(self) -> None:
        """SIGKILL: no shutdown, no last move of the journal."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.lives[-1].ended, self.lives[-1].killed = self.clock.now(), True
        self._close_log()

    def stop(self) -> int | None:
        """SIGTERM and wait: the process moves what its journal holds and exits; its exit status."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.terminate()
        try:
            code = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.lives[-1].ended = self.clock.now()
        self._close_log()
        return code

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def rss_mb(self) -> float | None:
        if self.proc is None or self.proc.poll() is not None:
            return None
        try:
            proc = psutil.Process(self.proc.pid)
            if proc.status() == psutil.STATUS_ZOMBIE:  # killed, not reaped yet
                return None
            return float(proc.memory_info().rss) / 2**20
        except psutil.Error:
            return None


class Clock:
    """Seconds since the load began (before it: negative)."""

    def __init__(self) -> None:
        self.zero = time.perf_counter()

    def start_load(self) -> float:
        """The load begins now: zero moves here; returns how far it moved."""
        now = time.perf_counter()
        shift, self.zero = now - self.zero, now
        return shift

    def now(self) -> float:
        return time.perf_counter() - self.zero


# -- the clients --------------------------------------------------------------------------------------------------


@dataclass
class Call:
    """One HTTP request a client made."""

    kind: str  # "grade", "answer" (quiz answer), "setup" (learner, session, next question)
    marker: str | None
    server: str
    at: float  # seconds since the load began, when sent
    seconds: float
    outcome: str  # "200", "503", ... or the connection error's class name
    attempt_id: str | None = None


@dataclass
class Answer:
    """A quiz answer: acknowledged once, however many requests it took."""

    marker: str
    attempt_id: str | None = None
    tries: int = 0
    replayed: bool = False


class Load:
    """The clients' shared state: the servers, the stop flag, and what every client recorded."""

    def __init__(self, servers: list[Server], clock: Clock, secret: str, question_ids: list[str],
                 answers: list[str], run_id: str) -> None:
        self.servers = servers
        self.clock = clock
        self.secret = secret
        self.question_ids = question_ids
        self.answers = answers
        self.run_id = run_id
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.calls: list[Call] = []
        self.quiz_answers: list[Answer] = []

    def pick(self, home: int) -> Server | None:
        """The client's home process if it takes load, else the other one, else None."""
        for i in (home, 1 - home):
            if self.servers[i].healthy:
                return self.servers[i]
        return None

    def record(self, call: Call) -> None:
        with self.lock:
            self.calls.append(call)

    def answer_text(self, n: int, marker: str) -> str:
        text = self.answers[n % len(self.answers)][:1900]
        return f"{text} [{marker}]"

    def send(self, clients: dict[str, httpx.Client], server: Server, kind: str, marker: str | None, method: str,
             path: str, **kwargs: Any) -> httpx.Response | None:
        """One request, recorded; None when the connection failed (the server is then marked down)."""
        client = clients.get(server.name)
        if client is None:
            client = clients[server.name] = httpx.Client(base_url=server.base, timeout=REQUEST_TIMEOUT_S,
                                                         limits=CLIENT_LIMITS)
        at = self.clock.now()
        start = time.perf_counter()
        try:
            res = client.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            self.record(Call(kind, marker, server.name, at, time.perf_counter() - start, type(exc).__name__))
            if isinstance(exc, CONNECTION_ERRORS):
                server.healthy = False
            return None
        seconds = time.perf_counter() - start
        attempt_id = None
        if res.status_code == 200 and kind in ("grade", "answer"):
            attempt_id = res.json().get("attempt_id")
        self.record(Call(kind, marker, server.name, at, seconds, str(res.status_code), attempt_id))
        return res

    def grading_client(self, idx: int) -> None:
        """POST /v1/grade until the run ends; each answer once, marked."""
        clients: dict[str, httpx.Client] = {}
        headers = {"X-API-Key": self.secret}
        n = idx
        try:
            while not self.stop.is_set():
                server = self.pick(idx % 2)
                if server is None:
                    time.sleep(0.05)
                    continue
                marker = f"soak-{self.run_id}-g{idx}-{n}"
                qid = self.question_ids[n % len(self.question_ids)]
                body = {"question_id": qid, "answer": self.answer_text(n, marker)}
                n += 1
                res = self.send(clients, server, "grade", marker, "POST", "/v1/grade", json=body, headers=headers)
                if res is not None and res.status_code != 200:
                    time.sleep(0.2)
        finally:
            for client in clients.values():
                client.close()

    def quiz_client(self, idx: int) -> None:
        """Quiz sessions until the run ends: each answer retried with its Idempotency-Key until acknowledged."""
        clients: dict[str, httpx.Client] = {}
        n = idx
        session_id: str | None = None
        try:
            while not self.stop.is_set():
                server = self.pick(idx % 2)
                if server is None:
                    time.sleep(0.05)
                    continue
                if session_id is None:
                    session_id = self._new_session(clients, server)
                    continue
                res = self.send(clients, server, "setup", None, "GET", f"/v1/sessions/{session_id}/next")
                if res is None or res.status_code != 200:
                    time.sleep(0.2)
                    continue
                step = res.json()
                if step["done"]:
                    session_id = None
                    continue
                marker = f"soak-{self.run_id}-q{idx}-{n}"
                body = {"question_id": step["question"]["id"], "answer": self.answer_text(n, marker)}
                n += 1
                self._answer(clients, idx, session_id, marker, body)
        finally:
            for client in clients.values():
                client.close()

    def _new_session(self, clients: dict[str, httpx.Client], server: Server) -> str | None:
        res = self.send(clients, server, "setup", None, "POST", "/v1/learners", json={})
        if res is None or res.status_code != 201:
            time.sleep(0.2)
            return None
        body = {"learner_id": res.json()["id"], "length": QUIZ_LENGTH}
        res = self.send(clients, server, "setup", None, "POST", "/v1/sessions", json=body)
        if res is None or res.status_code != 201:
            time.sleep(0.2)
            return None
        return str(res.json()["id"])

    def _answer(self, clients: dict[str, httpx.Client], idx: int, session_id: str, marker: str,
                body: dict[str, str]) -> None:
        answer = Answer(marker)
        with self.lock:
            self.quiz_answers.append(answer)
        headers = {"Idempotency-Key": marker}
        give_up = None
        while True:
            if self.stop.is_set():
                give_up = give_up or time.perf_counter() + QUIZ_GRACE_S
                if time.perf_counter() > give_up:
                    return
            server = self.pick(idx % 2)
            if server is None:
                time.sleep(0.05)
                continue
            answer.tries += 1
            res = self.send(clients, server, "answer", marker, "POST", f"/v1/sessions/{session_id}/answers",
                            json=body, headers=headers)
            if res is not None and res.status_code == 200:
                out = res.json()
                answer.attempt_id, answer.replayed = out["attempt_id"], bool(out.get("replayed"))
                return
            if res is not None and res.status_code < 500:
                return  # refused for good (a 409 or 422): recorded, not retried
            time.sleep(0.1)


def health_check(servers: list[Server], stop: threading.Event) -> None:
    """Marks a server that clients marked down as taking load again once its /readyz answers 200."""
    while not stop.wait(PROBE_S):
        for server in servers:
            if server.healthy or server.proc is None or server.proc.poll() is not None:
                continue
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{server.base}/readyz", timeout=5).status_code == 200:
                    server.healthy = True


def sample_rss(servers: list[Server], clock: Clock, stop: threading.Event) -> None:
    while True:
        for server in servers:
            rss = server.rss_mb()
            if rss is not None and server.lives:
                server.lives[-1].rss_mb.append((clock.now(), rss))
        if stop.wait(SAMPLE_S):
            return


def progress(load: Load, servers: list[Server], clock: Clock, stop: threading.Event, every_s: float = 30) -> None:
    while not stop.wait(every_s):
        with load.lock:
            calls = list(load.calls)
        acked = sum(1 for c in calls if c.attempt_id)
        errors = sum(1 for c in calls if c.outcome != "200" and not (c.kind == "setup" and c.outcome == "201"))
        rss = ", ".join(f"{s.name} {r:.0f} MB" for s in servers if (r := s.rss_mb()) is not None)
        print(f"soak: {clock.now():5.0f} s  {len(calls)} requests, {acked} acknowledged attempts, "
              f"{errors} errors; RSS {rss}", file=sys.stderr, flush=True)


# -- the run ------------------------------------------------------------------------------------------------------


def bank_questions(base: str) -> list[str]:
    """Up to 8 open-answer bank questions (no options) for the grading clients."""
    page = httpx.get(f"{base}/v1/questions", params={"limit": 50}, timeout=30).json()["items"]
    ids = [q["id"] for q in page if not q.get("options")][:8]
    if not ids:
        raise RuntimeError("no open-answer question in the bank")
    return ids


def run(args: argparse.Namespace) -> dict[str, Any]:
    run_id = secrets.token_hex(4)
    work = Path(tempfile.mkdtemp(prefix="tutor-soak-"))
    data, logs = work / "data", work / "logs"
    data.mkdir()
    logs.mkdir()
    clock = Clock()
    servers: list[Server] = []
    out: dict[str, Any] = {"run_id": run_id, "seconds": args.seconds, "clients": args.clients, "logs": str(logs)}
    failed = True
    try:
        with postgres_database(args.postgres) as (db_url, conninfo), redis_database(args.redis, args.redis_db) as rurl:
            env = bench_env(data, TUTOR_DATABASE_URL=db_url, TUTOR_REDIS_URL=rurl)
            out["database"] = make_url(db_url).database
            out["redis"] = rurl
            started = time.perf_counter()
            prepare_data(data, env)
            key_id, secret = create_key(env)
            out["prepare_s"] = time.perf_counter() - started
            servers = [Server(name, env, logs, clock) for name in ("A", "B")]
            try:
                for server in servers:
                    server.start()
                for server in servers:
                    server.wait_ready()
                out["ready_s"] = time.perf_counter() - started - out["prepare_s"]
                load = Load(servers, clock, secret, bank_questions(servers[0].base), dev_answers(), run_id)
                out["load"] = drive(load, servers, clock, args)
                out["drain"] = drain(servers, data / "journal")
                out["database_counts"] = count(conninfo, key_id, load)
            finally:  # before the database goes
                out["exit_codes"] = {s.name: s.stop() for s in servers}
            with psycopg.connect(conninfo) as conn:  # nothing more arrives with the processes' last moves
                row = conn.execute("SELECT count(*) FROM attempts").fetchone()
                out["attempts_after_shutdown"] = int(row[0]) if row else 0
            journal = data / "journal"
            out["left_in_journal"] = sorted(p.name for p in journal.glob("*")) if journal.exists() else []
            out["rss"] = rss_figures(servers, args.warmup, args.rss_tolerance)
            out["server_logs"] = scan_logs(logs)
            out["figures"] = summarize(out, load.calls)
            failed = False
    finally:
        if args.keep or failed:
            print(f"soak: kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return out


def drive(load: Load, servers: list[Server], clock: Clock, args: argparse.Namespace) -> dict[str, Any]:
    """The load, with the kill and the restart; what the clients saw."""
    stop_side = threading.Event()
    quiz_clients = round(args.clients * args.quiz_share)
    roles = ["quiz" if i < quiz_clients else "grade" for i in range(args.clients)]
    threads = [threading.Thread(target=load.quiz_client if role == "quiz" else load.grading_client, args=(i,),
                                name=f"{role}-{i}", daemon=True) for i, role in enumerate(roles)]
    side = [threading.Thread(target=health_check, args=(servers, stop_side), daemon=True),
            threading.Thread(target=sample_rss, args=(servers, clock, stop_side), daemon=True),
            threading.Thread(target=progress, args=(load, servers, clock, stop_side), daemon=True)]
    load_avg_start = os.getloadavg()
    cpu_start = psutil.Process().cpu_times()
    shift = clock.start_load()
    for server in servers:  # their start and ready times, in the load's time
        for life in server.lives:
            life.started -= shift
            life.ready = None if life.ready is None else life.ready - shift
    for t in [*side, *threads]:
        t.start()
    victim = servers[1]
    kill_at = args.seconds * args.kill_at
    time.sleep(max(0.0, kill_at - clock.now()))
    killed_at = clock.now()
    victim.kill()
    print(f"soak: {killed_at:5.0f} s  killed {victim.name} (SIGKILL, pid {victim.lives[-1].pid})", file=sys.stderr)
    restart = threading.Thread(target=restart_later, args=(victim, clock, args.restart_after), daemon=True)
    restart.start()
    time.sleep(max(0.0, args.seconds - clock.now()))
    load.stop.set()
    ended_at = clock.now()
    cpu_end = psutil.Process().cpu_times()
    for t in threads:
        t.join(timeout=QUIZ_GRACE_S + REQUEST_TIMEOUT_S + 10)
    restart.join()  # the drain needs it ready
    stop_side.set()
    for t in side:
        t.join(timeout=30)
    restarted = victim.lives[-1]
    if len(victim.lives) < 2 or restarted.ready is None:
        raise RuntimeError(f"{victim.name} did not start again (see {victim.logs})")
    return {"killed": victim.name, "killed_at_s": killed_at, "restarted_at_s": restarted.started,
            "ready_at_s": restarted.ready, "ended_at_s": ended_at, "clients_done_at_s": clock.now(),
            "grading_clients": args.clients - quiz_clients, "quiz_clients": quiz_clients,
            "question_ids": load.question_ids, "clients_still_running": sum(t.is_alive() for t in threads),
            "client_cpu_s": (cpu_end.user + cpu_end.system) - (cpu_start.user + cpu_start.system),
            "load_average": {"start": load_avg_start, "end": os.getloadavg()}}


def restart_later(server: Server, clock: Clock, after_s: float) -> None:
    """Start the killed process again after `after_s`; it takes load again once ready."""
    time.sleep(after_s)
    server.start()
    server.wait_ready()
    life = server.lives[-1]
    print(f"soak: {clock.now():5.0f} s  {server.name} started again (pid {life.pid}), ready after "
          f"{(life.ready or 0.0) - life.started:.1f} s", file=sys.stderr)


def drain(servers: list[Server], journal: Path) -> dict[str, Any]:
    """Wait until no process holds acknowledged attempts that are not in the database yet."""
    start = time.perf_counter()
    pending: dict[str, int | None] = {}
    segments: list[str] = []
    while time.perf_counter() - start < DRAIN_TIMEOUT_S:
        for server in servers:
            try:
                pending[server.name] = httpx.get(f"{server.base}/readyz", timeout=10).json().get("journal_pending")
            except (httpx.HTTPError, ValueError):
                pending[server.name] = None
        segments = sorted(p.name for p in journal.glob("attempts-*.jsonl")) if journal.exists() else []
        if all(v == 0 for v in pending.values()) and not segments:
            return {"drained": True, "seconds": time.perf_counter() - start, "pending": pending}
        time.sleep(0.25)
    return {"drained": False, "seconds": time.perf_counter() - start, "pending": pending, "segments": segments}


MARKER = re.compile(r"\[(soak-[0-9a-f]+-[gq]\d+-\d+)\]$")


def count(conninfo: str, key_id: str, load: Load) -> dict[str, Any]:
    """The attempts in the database against what the clients were told."""
    with psycopg.connect(conninfo) as conn:
        rows = conn.execute("SELECT id, answer, api_key_id, session_id, idempotency_key FROM attempts").fetchall()
        usage = conn.execute("SELECT coalesce(sum(calls), 0) FROM api_usage WHERE key_id = %s AND endpoint = 'grade'",
                             (key_id,)).fetchone()
    usage_calls = int(usage[0]) if usage else 0
    ids = Counter(row[0] for row in rows)
    grade_rows: dict[str, list[str]] = defaultdict(list)
    quiz_rows: dict[str, list[str]] = defaultdict(list)
    unmarked = []
    for attempt_id, answer, api_key, session_id, idem in rows:
        found = MARKER.search(answer or "")
        marker = found.group(1) if found else None
        if session_id is not None and idem:
            quiz_rows[idem].append(attempt_id)
        elif api_key == key_id and marker:
            grade_rows[marker].append(attempt_id)
        else:
            unmarked.append(attempt_id)

    grade_calls = {c.marker: c for c in load.calls if c.kind == "grade" and c.marker}
    acked = {m: c.attempt_id for m, c in grade_calls.items() if c.attempt_id}
    lost = [m for m, a in acked.items() if a not in grade_rows.get(m, [])]
    doubled = [m for m, found_ids in grade_rows.items() if len(found_ids) > 1]
    unacked = [m for m in grade_rows if m not in acked]
    in_flight = [m for m in unacked if m in grade_calls and not grade_calls[m].outcome.isdigit()]
    after_error = [m for m in unacked if m in grade_calls and grade_calls[m].outcome.isdigit()]
    unknown = [m for m in unacked if m not in grade_calls]

    answers = {a.marker: a for a in load.quiz_answers}
    quiz_acked = {m: a.attempt_id for m, a in answers.items() if a.attempt_id}
    quiz_lost = [m for m, a in quiz_acked.items() if a not in quiz_rows.get(m, [])]
    quiz_doubled = [m for m, found_ids in quiz_rows.items() if len(found_ids) > 1]
    quiz_unacked = [m for m in quiz_rows if m not in quiz_acked]
    quiz_unknown = [m for m in quiz_unacked if m not in answers]

    acknowledged = len(acked) + len(quiz_acked)
    return {
        "attempts_in_database": len(rows),
        "acknowledged": acknowledged,
        "grade": {"sent": len(grade_calls), "acknowledged": len(acked),
                  "in_database": sum(map(len, grade_rows.values())),
                  "lost": len(lost), "doubled": len(doubled), "stored_unacknowledged_connection_cut": len(in_flight),
                  "stored_after_error_response": len(after_error), "stored_not_sent": len(unknown),
                  "usage_calls": usage_calls, "examples": {"lost": lost[:5], "doubled": doubled[:5],
                                                           "after_error": after_error[:5]}},
        "quiz": {"answers": len(answers), "acknowledged": len(quiz_acked),
                 "in_database": sum(map(len, quiz_rows.values())),
                 "lost": len(quiz_lost), "doubled": len(quiz_doubled), "unacknowledged": len(answers) - len(quiz_acked),
                 "stored_unacknowledged": len(quiz_unacked) - len(quiz_unknown), "stored_not_sent": len(quiz_unknown),
                 "retried": sum(1 for a in answers.values() if a.tries > 1),
                 "replayed": sum(1 for a in answers.values() if a.replayed),
                 "examples": {"lost": quiz_lost[:5], "doubled": quiz_doubled[:5]}},
        "duplicate_ids": sum(1 for n in ids.values() if n > 1),
        "unmarked_rows": len(unmarked),
    }


def rss_figures(servers: list[Server], warmup: float, tolerance: float) -> list[dict[str, Any]]:
    """Per process life: RSS one minute in (after its restart, for a restarted one), at its end, its max after
    that minute, and whether it stayed within the tolerance of the one-minute value."""
    out = []
    for server in servers:
        for i, life in enumerate(server.lives):
            origin = 0.0 if i == 0 else (life.ready or life.started)  # the restarted one: from its restart
            after = [(t, mb) for t, mb in life.rss_mb if t >= origin + warmup]
            fig: dict[str, Any] = {"life": life.name, "pid": life.pid, "killed": life.killed,
                                   "samples": len(life.rss_mb), "first_mb": life.rss_mb[0][1] if life.rss_mb else None,
                                   "end_mb": life.rss_mb[-1][1] if life.rss_mb else None,
                                   "max_mb": max((mb for _, mb in life.rss_mb), default=None),
                                   "series": [(round(t, 1), round(mb, 1)) for t, mb in life.rss_mb]}
            if len(after) >= 2:
                base = after[0][1]
                top = max(mb for _, mb in after)
                fig.update({"at_1min_mb": base, "at_1min_s": after[0][0], "max_after_1min_mb": top,
                            "growth": top / base - 1, "end_growth": after[-1][1] / base - 1,
                            "within": top <= base * (1 + tolerance), "checked": True})
            else:
                fig.update({"checked": False, "why": "ran less than a minute past its first minute"})
            out.append(fig)
    return out


def scan_logs(logs: Path) -> dict[str, dict[str, Any]]:
    """Error and warning lines in each process's log (the access log lines left out)."""
    out = {}
    for path in sorted(logs.glob("*.log")):
        errors: Counter[str] = Counter()
        warnings: Counter[str] = Counter()
        tracebacks = 0
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("Traceback"):
                tracebacks += 1
            elif "ERROR" in line:
                errors[_shape(line)] += 1
            elif "WARNING" in line:
                warnings[_shape(line)] += 1
        out[path.stem] = {"tracebacks": tracebacks, "errors": dict(errors.most_common(5)),
                          "warnings": dict(warnings.most_common(5))}
    return out


def _shape(line: str) -> str:
    """A log line without its time stamp and numbers, so that repeats count as one."""
    line = re.sub(r"^\S+ \S+ ", "", line.strip())
    return re.sub(r"\d+", "N", line)[:160]


# -- the report ---------------------------------------------------------------------------------------------------


def summarize(out: dict[str, Any], calls: list[Call]) -> dict[str, Any]:
    load = out["load"]
    window = (load["killed_at_s"], load["ready_at_s"] + 5)
    by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    in_window: Counter[str] = Counter()
    outside: Counter[str] = Counter()
    for c in calls:
        ok = c.outcome == "200" or (c.kind == "setup" and c.outcome == "201")
        by_kind[c.kind][c.outcome] += 1
        if not ok:
            answered_at = c.at + c.seconds  # a request cut by the kill was sent before it
            (in_window if window[0] <= answered_at <= window[1] else outside)[f"{c.kind} {c.outcome}"] += 1
    grade_ok = [c.seconds for c in calls if c.kind == "grade" and c.attempt_id]
    answer_ok = [c.seconds for c in calls if c.kind == "answer" and c.attempt_id]
    seconds = max(load["ended_at_s"], 1e-9)
    figures: dict[str, Any] = {
        "requests_sent": len(calls),
        "requests_by_kind": {k: sum(v.values()) for k, v in by_kind.items()},
        "outcomes_by_kind": {k: dict(v) for k, v in by_kind.items()},
        "errors_during_kill_window": dict(in_window),
        "errors_outside_kill_window": dict(outside),
        "errors_outside_kill_window_first": [
            {"kind": c.kind, "server": c.server, "sent_at_s": round(c.at, 3), "seconds": round(c.seconds, 3),
             "outcome": c.outcome} for c in calls
            if c.outcome not in ("200", "201") and not window[0] <= c.at + c.seconds <= window[1]][:20],
        "kill_window_s": list(window),
        "grade_acknowledged_per_s": len(grade_ok) / seconds,
        "quiz_acknowledged_per_s": len(answer_ok) / seconds,
    }
    if grade_ok:
        figures["grade_p50_ms"], figures["grade_p99_ms"] = percentiles(grade_ok)
    if answer_ok:
        figures["quiz_answer_p50_ms"], figures["quiz_answer_p99_ms"] = percentiles(answer_ok)
    if grade_ok or answer_ok:
        figures["all_p50_ms"], figures["all_p99_ms"] = percentiles(grade_ok + answer_ok)
    counts = out["database_counts"]
    g, q = counts["grade"], counts["quiz"]
    checked = [r for r in out["rss"] if r["checked"] and not r["killed"]]
    problems = []
    if g["lost"] or q["lost"]:
        problems.append(f"lost attempts: {g['lost']} graded, {q['lost']} quiz")
    if g["doubled"] or q["doubled"] or counts["duplicate_ids"]:
        problems.append(f"doubled attempts: {g['doubled']} graded, {q['doubled']} quiz")
    if g["stored_after_error_response"]:
        problems.append(f"{g['stored_after_error_response']} attempts stored for a request answered with an error")
    if g["stored_not_sent"] or q["stored_not_sent"] or counts["unmarked_rows"]:
        problems.append("attempts in the database that no client sent")
    if g["usage_calls"] != g["in_database"]:
        problems.append(f"usage counter {g['usage_calls']} != {g['in_database']} stored graded attempts")
    if q["unacknowledged"]:
        problems.append(f"{q['unacknowledged']} quiz answers never acknowledged")
    if out["attempts_after_shutdown"] != counts["attempts_in_database"]:
        problems.append(f"{out['attempts_after_shutdown'] - counts['attempts_in_database']} attempts reached the "
                        "database only at shutdown")
    if not out["drain"]["drained"]:
        problems.append("the attempt journal did not drain")
    if out["left_in_journal"]:
        problems.append(f"files left in the journal folder: {out['left_in_journal']}")
    problems += [f"RSS of {r['life']} grew {100 * r['growth']:.1f} % after its first minute"
                 for r in checked if not r["within"]]
    figures["rss_checked"] = [r["life"] for r in checked]
    figures["problems"] = problems
    figures["passed"] = not problems
    return figures


def report(out: dict[str, Any]) -> str:
    f, c, load = out["figures"], out["database_counts"], out["load"]
    g, q = c["grade"], c["quiz"]
    unexplained = c["attempts_in_database"] - c["acknowledged"] - g["stored_unacknowledged_connection_cut"]
    lines = [
        "",
        f"== soak {out['run_id']}: {out['seconds']} s, {out['clients']} clients "
        f"({load['grading_clients']} grading, {load['quiz_clients']} quiz), 2 API processes on PostgreSQL + Redis",
        f"kill -9 of {load['killed']} at {load['killed_at_s']:.1f} s; started again at {load['restarted_at_s']:.1f} s,"
        f" ready at {load['ready_at_s']:.1f} s; load ended at {load['ended_at_s']:.1f} s",
        f"client CPU {load['client_cpu_s']:.0f} s over the load; machine load average (1 min) "
        f"{load['load_average']['start'][0]:.1f} at the start, {load['load_average']['end'][0]:.1f} at the end",
        f"requests sent: {f['requests_sent']} ({', '.join(f'{k} {v}' for k, v in f['requests_by_kind'].items())})",
        f"acknowledged attempts: {c['acknowledged']} ({g['acknowledged']} graded, {q['acknowledged']} quiz answers); "
        f"{f['grade_acknowledged_per_s']:.1f} graded/s, {f['quiz_acknowledged_per_s']:.1f} quiz answers/s",
        f"attempts in the database: {c['attempts_in_database']} ({g['in_database']} graded, {q['in_database']} quiz)"
        f" = {c['acknowledged']} acknowledged + {g['stored_unacknowledged_connection_cut']} graded requests whose "
        f"connection was cut (outcome unknown to the client) + {unexplained} other",
        f"lost: {g['lost'] + q['lost']}  doubled: {g['doubled'] + q['doubled'] + c['duplicate_ids']}",
        f"  graded: stored without an acknowledgement, connection cut at the kill: "
        f"{g['stored_unacknowledged_connection_cut']}; stored after an error response: "
        f"{g['stored_after_error_response']}; stored but never sent: {g['stored_not_sent']}; usage counter "
        f"{g['usage_calls']} calls",
        f"  quiz: {q['answers']} answers, {q['retried']} retried, {q['replayed']} replayed, "
        f"{q['unacknowledged']} never acknowledged ({q['stored_unacknowledged']} of them stored)",
        f"journal drained in {out['drain']['seconds']:.2f} s: {out['drain']['drained']}",
        "latency of acknowledged requests: "
        + ", ".join(f"{name} p50 {f[f'{key}_p50_ms']:.1f} ms p99 {f[f'{key}_p99_ms']:.1f} ms"
                    for name, key in (("grade", "grade"), ("quiz answer", "quiz_answer"), ("all", "all"))
                    if f"{key}_p50_ms" in f),
        f"outcomes: {json.dumps(f['outcomes_by_kind'])}",
        f"errors during the kill window {f['kill_window_s'][0]:.0f}-{f['kill_window_s'][1]:.0f} s: "
        f"{json.dumps(f['errors_during_kill_window'])}",
        f"errors outside it: {json.dumps(f['errors_outside_kill_window'])}",
        "RSS (MB):",
    ]
    for r in out["rss"]:
        line = (f"  {r['life']} pid {r['pid']}{' (killed)' if r['killed'] else ''}: first {_mb(r['first_mb'])}, "
                f"end {_mb(r['end_mb'])}, max {_mb(r['max_mb'])}")
        if r["checked"]:
            line += (f"; at 1 min ({r['at_1min_s']:.0f} s) {r['at_1min_mb']:.1f}, "
                     f"max after {r['max_after_1min_mb']:.1f} ({100 * r['growth']:+.1f} %), "
                     f"end {100 * r['end_growth']:+.1f} %: "
                     f"{'within' if r['within'] else 'OUTSIDE'} 10 %")
        else:
            line += f"; not checked: {r['why']}"
        lines.append(line)
    for name, log in out["server_logs"].items():
        if log["tracebacks"] or log["errors"]:
            lines.append(f"log {name}: {log['tracebacks']} tracebacks, errors {json.dumps(log['errors'])}")
    lines.append("PASS" if f["passed"] else "FAIL: " + "; ".join(f["problems"]))
    return "\n".join(lines)


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=300, help="length of the load (default 300)")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--quiz-share", type=float, default=0.5, help="share of the clients answering quiz sessions")
    parser.add_argument("--kill-at", type=float, default=0.5, help="when to kill one process, as a share of the run")
    parser.add_argument("--restart-after", type=float, default=10.0, help="seconds before the killed one restarts")
    parser.add_argument("--warmup", type=float, default=60.0, help="RSS is compared with its value this far in")
    parser.add_argument("--rss-tolerance", type=float, default=0.10)
    parser.add_argument("--postgres", default=os.environ.get("SOAK_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"),
                        help="a PostgreSQL URL whose user may create databases")
    parser.add_argument("--redis", default=os.environ.get("SOAK_REDIS_URL", "redis://127.0.0.1:6379"))
    parser.add_argument("--redis-db", type=int, default=None, help="default: an empty one of 1-14")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (data, logs)")
    args = parser.parse_args()
    out = run(args)
    print(report(out))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=str) + "\n")
    return 0 if out["figures"]["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
