"""Private PostgreSQL and Redis servers, and a size-limited folder, that a fault test starts, stops and
removes itself (the machine's own PostgreSQL on 5432 and Redis on 6379 are never touched).

Each helper raises `Unavailable` with the reason when the machine cannot provide it (a binary missing, no
root for a mount); tests turn that into a skip.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.serving import free_port

PG_BIN = Path("/usr/local/bin")


class Unavailable(Exception):
    """This machine cannot provide the instance; the message says why."""


def _wait_port(port: int, up: bool, timeout: float = 60) -> None:
    """Wait until 127.0.0.1:port accepts connections (up) or refuses them (not up)."""
    import socket

    deadline = time.monotonic() + timeout
    while True:
        with socket.socket() as sock:
            sock.settimeout(1)
            accepting = sock.connect_ex(("127.0.0.1", port)) == 0
        if accepting == up:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"port {port} did not {'open' if up else 'close'} within {timeout:g}s")
        time.sleep(0.05)


class PrivatePostgres:
    """A PostgreSQL cluster in a temporary folder on a free port, run as an unprivileged user when this
    process is root (initdb refuses root)."""

    def __init__(self, folder: Path, port: int, user: str | None) -> None:
        self.folder = folder
        self.port = port
        self.user = user
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        command = list(args) if self.user is None else ["runuser", "-u", self.user, "--", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=self.folder)

    def start(self) -> None:
        """Start the server (again) and wait until it accepts connections."""
        options = (f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c max_connections=60")
        proc = self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.folder / "data"), "-l", str(self.folder / "log"),
                         "-w", "-t", "60", "-o", options, "start")
        if proc.returncode != 0:
            log = (self.folder / "log").read_text(errors="replace")[-2000:] if (self.folder / "log").exists() else ""
            raise Unavailable(f"pg_ctl start failed: {proc.stderr.strip()} {log}")
        _wait_port(self.port, up=True)

    def stop(self) -> None:
        """Stop the server the way a crash does (immediate: no checkpoint, every connection cut)."""
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate", "-w", "stop")
        _wait_port(self.port, up=False)


def _unprivileged_user() -> str | None:
    """None when not root; else a user that initdb accepts (nobody)."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("nobody")
    except KeyError as exc:
        raise Unavailable("running as root and there is no 'nobody' user to run PostgreSQL as") from exc
    if shutil.which("runuser") is None:
        raise Unavailable("running as root and runuser is not installed")
    return "nobody"


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A fresh PostgreSQL cluster, started; stopped and removed on exit."""
    for tool in ("initdb", "pg_ctl", "postgres"):
        if not (PG_BIN / tool).exists():
            raise Unavailable(f"{PG_BIN / tool} is not installed")
    user = _unprivileged_user()
    folder = Path(tempfile.mkdtemp(prefix="tutor-pg-"))
    try:
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(folder, entry.pw_uid, entry.pw_gid)
        instance = PrivatePostgres(folder, free_port(), user)
        init = instance._run(str(PG_BIN / "initdb"), "-D", str(folder / "data"), "-U", "postgres", "-A", "trust",
                             "-E", "UTF8", "--no-sync")
        if init.returncode != 0:
            raise Unavailable(f"initdb failed: {init.stderr.strip()[-500:]}")
        instance.start()
        try:
            yield instance
        finally:
            instance.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class PrivateRedis:
    """redis-server on a free port, no persistence; `kill` is a SIGKILL, `start` brings it back on the same port."""

    def __init__(self, binary: str, port: int) -> None:
        self.binary = binary
        self.port = port
        self.url = f"redis://127.0.0.1:{port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--protected-mode", "no", "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            _wait_port(self.port, up=True, timeout=30)
        except TimeoutError as exc:
            self.kill()
            raise Unavailable(f"redis-server did not start: {exc}") from exc

    def kill(self) -> None:
        """SIGKILL the server and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None
        _wait_port(self.port, up=False)


@contextmanager
def private_redis() -> Iterator[PrivateRedis]:
    """A redis-server of this test's own, started; killed on exit."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise Unavailable("redis-server is not installed")
    instance = PrivateRedis(binary, free_port())
    instance.start()
    try:
        yield instance
    finally:
        instance.kill()


@contextmanager
def small_filesystem(size_kb: int) -> Iterator[Path]:
    """A folder on a file system of `size_kb` KB: a tmpfs mount, else a loop-mounted ext4 image (both need
    root); unmounted and removed on exit."""
    if os.geteuid() != 0:
        raise Unavailable("mounting a size-limited file system needs root")
    base = Path(tempfile.mkdtemp(prefix="tutor-full-"))
    mount = base / "mnt"
    mount.mkdir()
    image = base / "disk.img"
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(mount)],
                             capture_output=True, text=True, timeout=60)
    if mounted.returncode != 0:
        with open(image, "wb") as fh:
            fh.truncate(max(size_kb, 1024) * 1024)
        made = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True, text=True, timeout=60)
        mounted = subprocess.run(["mount", "-o", "loop", str(image), str(mount)], capture_output=True, text=True,
                                 timeout=60) if made.returncode == 0 else made
        if mounted.returncode != 0:
            shutil.rmtree(base, ignore_errors=True)
            raise Unavailable(f"cannot mount a tmpfs or a loop ext4 image here: {mounted.stderr.strip()[-300:]}")
    try:
        yield mount
    finally:
        gc.collect()  # an engine left open by a failed run still holds its database file
        for _ in range(50):  # a server thread may still hold a file open for a moment
            if subprocess.run(["umount", str(mount)], capture_output=True, timeout=60).returncode == 0:
                break
            time.sleep(0.1)
        else:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=60)
        with contextlib.suppress(OSError):
            shutil.rmtree(base)


def fill(folder: Path, leave_bytes: int = 0) -> Path:
    """Fill the file system under `folder` with one file until at most `leave_bytes` are free; the file."""
    filler = folder / "filler.bin"
    chunk = b"\0" * (64 * 1024)
    with open(filler, "wb") as fh:
        while True:
            free = shutil.disk_usage(folder).free
            if free <= leave_bytes:
                break
            try:
                fh.write(chunk[: max(1, min(len(chunk), free - leave_bytes))])
                fh.flush()
            except OSError:
                break
    return filler
