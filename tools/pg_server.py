"""A throwaway PostgreSQL server on 127.0.0.1, for benchmarks and tries.

    python tools/pg_server.py            # starts one, prints its URL, stops on Ctrl-C or SIGTERM

It uses the machine's server binaries (``pg_config --bindir``), a temporary data folder and a
free port; as root it runs them as the ``postgres`` user (the server refuses to run as root).
Settings favour speed over durability (``fsync=off``): never keep data you care about in it.

The server is a daemon of its own: it outlives a process that ends without stopping it. So
while one runs, SIGTERM (a CI timeout, ``kill``) is turned into ``KeyboardInterrupt``, which
unwinds the process through the code that stops the server and deletes its folder.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Iterator

FAST = ("-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
        "-c max_connections=50 -c shared_buffers=256MB")


def bindir() -> Path:
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise RuntimeError(f"pg_config not found ({e}): install PostgreSQL (apt-get install postgresql)") from None
    path = Path(out.strip())
    if not (path / "initdb").exists():
        raise RuntimeError(f"{path}/initdb not found: install the server (apt-get install postgresql)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the cleanup short
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """While inside, SIGTERM raises KeyboardInterrupt, as Ctrl-C does: ``finally`` blocks and
    pytest's teardown run instead of the process just ending. Only when SIGTERM still has its
    default action (someone else's handler is left alone), and only in the main thread."""
    mine = (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
    if mine:
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        if mine:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextmanager
def throwaway_server(user: str = "om", settings: str = FAST) -> Iterator[str]:
    """Start a server, yield the URL of its ``postgres`` database, stop and delete it (on
    SIGTERM too, see the module's notes)."""
    with sigterm_interrupts():
        yield from _server(user, settings)


def _server(user: str, settings: str) -> Iterator[str]:
    bins = bindir()
    root = Path(tempfile.mkdtemp(prefix="ohm-pg-"))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    port = free_port()
    try:
        subprocess.run(_as_server_user([str(bins / "initdb"), "-D", str(data), "-A", "trust", "-U", user,
                                        "--no-sync"]), check=True, capture_output=True)
        subprocess.run(_as_server_user([
            str(bins / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "-t", "60",
            "-o", f"-k {root} -p {port} -h 127.0.0.1 {settings}", "start",
        ]), check=True, capture_output=True)
        try:
            yield f"postgresql://{user}@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run(_as_server_user([str(bins / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
                           capture_output=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


#: What the benches run with: PostgreSQL's own durability (fsync, synchronous_commit and
#: full_page_writes on, as a production server has them), more shared memory than the
#: default 128 MB, and room for a bench's writer processes.
DURABLE = "-c max_connections=50 -c shared_buffers=256MB"


def _running(bins: Path, data: Path) -> bool:
    return subprocess.run(_as_server_user([str(bins / "pg_ctl"), "-D", str(data), "status"]),
                          check=False, capture_output=True).returncode == 0


@contextmanager
def kept_server(root: Path, user: str = "om", settings: str = DURABLE) -> Iterator[str]:
    """A server whose data folder (``root/data``) outlives it, so that databases built once
    (a bench's million-event histories) are there on the next run. Made on first use;
    started on a free port and stopped (a clean shutdown) afterwards. One user at a time:
    a second caller waits for the first (a lock file beside the folder). A server left
    running by a killed caller is stopped first. Yields the ``postgres`` database's URL."""
    import fcntl

    bins = bindir()
    root.mkdir(parents=True, exist_ok=True)
    data = root / "data"
    with open(root / "lock", "a") as lock, sigterm_interrupts():  # SIGTERM: a clean stop too
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.geteuid() == 0:
            shutil.chown(root, "postgres")
        if not (data / "PG_VERSION").exists():
            shutil.rmtree(data, ignore_errors=True)
            subprocess.run(_as_server_user([str(bins / "initdb"), "-D", str(data), "-A", "trust", "-U", user]),
                           check=True, capture_output=True)
        if _running(bins, data):
            subprocess.run(_as_server_user([str(bins / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
                           check=False, capture_output=True)
        port = free_port()
        subprocess.run(_as_server_user([
            str(bins / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "-t", "300",
            "-o", f"-k {root} -p {port} -h 127.0.0.1 {settings}", "start",
        ]), check=True, capture_output=True)
        try:
            yield f"postgresql://{user}@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run(_as_server_user([str(bins / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "-t", "300",
                                            "stop"]), check=False, capture_output=True)


if __name__ == "__main__":
    with throwaway_server() as url:
        print(url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
