"""A throwaway PgBouncer on 127.0.0.1 in front of a PostgreSQL server, for tests and benches.

    python tools/pgbouncer.py postgresql://om@127.0.0.1:5432/postgres    # prints its URL

It runs the machine's own ``pgbouncer`` (Debian's package: ``/usr/sbin/pgbouncer``) with an
ini of its own in a temporary folder, on a free port, every database of the server reachable
through it by name (``* = host=... port=...``). Its settings are Debian's defaults but for
what a pooler in front of a fleet is given: ``pool_mode`` (transaction by default, as
deployments run it), the pool's size, the clients it takes, trust for the server's users (the
throwaway server trusts them too). Nothing that would hide session state from a client is
set: no ``ignore_startup_parameters``, no ``max_prepared_statements``.

PgBouncer refuses to run as root: as root it runs as the ``postgres`` user, like the server.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

BINARY = "/usr/sbin/pgbouncer"


def binary() -> str:
    """The pgbouncer program, or RuntimeError saying how to install it."""
    found = shutil.which("pgbouncer") or (BINARY if os.access(BINARY, os.X_OK) else None)
    if found is None:
        raise RuntimeError("pgbouncer not found: install it (apt-get install pgbouncer)")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Pooler:
    """A running PgBouncer: ``url(database)`` reaches a database of the server through it;
    ``restart()`` stops it at once (every client connection ends) and starts it again on the
    same port, as an operator's restart does."""

    folder: Path
    port: int
    user: str
    process: subprocess.Popen | None = None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def admin_url(self) -> str:
        """PgBouncer's own console (``SHOW POOLS``, ``SHOW STATS``)."""
        return self.url("pgbouncer")

    def start(self) -> None:
        argv = [binary(), str(self.folder / "pgbouncer.ini")]
        if os.geteuid() == 0:  # setpriv execs: the child's pid is pgbouncer's own
            argv = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--", *argv]
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 20
        while True:
            if self.process.poll() is not None:
                log = (self.folder / "log").read_text(errors="replace") if (self.folder / "log").exists() else ""
                raise RuntimeError(f"pgbouncer exited with status {self.process.returncode}: {log[-500:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("pgbouncer did not listen within 20 s") from None
                time.sleep(0.05)

    def stop(self) -> None:
        """Stop at once (SIGTERM: PgBouncer's immediate shutdown), clients cut off."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()


def write_ini(folder: Path, server_url: str, port: int, *, pool_mode: str, pool_size: int,
              max_client_conn: int, user: str, settings: dict[str, str]) -> None:
    server = urlsplit(server_url)
    (folder / "userlist.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text("\n".join([
        "[databases]",
        f"* = host={server.hostname or '127.0.0.1'} port={server.port or 5432}",
        "[pgbouncer]",
        "listen_addr = 127.0.0.1",
        f"listen_port = {port}",
        "unix_socket_dir =",
        "auth_type = trust",
        f"auth_file = {folder / 'userlist.txt'}",
        f"admin_users = {user}",
        f"stats_users = {user}",
        f"pool_mode = {pool_mode}",
        f"default_pool_size = {pool_size}",
        f"max_client_conn = {max_client_conn}",
        f"logfile = {folder / 'log'}",
        f"pidfile = {folder / 'pid'}",
        *(f"{name} = {value}" for name, value in settings.items()),
        "",
    ]))


@contextmanager
def pooler(server_url: str, *, pool_mode: str = "transaction", pool_size: int = 10,
           max_client_conn: int = 400, **settings: str) -> Iterator[Pooler]:
    """A PgBouncer in front of the server at ``server_url``, stopped and removed afterwards.
    ``settings``: more of pgbouncer.ini's (``query_wait_timeout="5"``)."""
    folder = Path(tempfile.mkdtemp(prefix="ohm-pgbouncer-"))
    user = urlsplit(server_url).username or "postgres"
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    try:
        port = free_port()
        write_ini(folder, server_url, port, pool_mode=pool_mode, pool_size=pool_size,
                  max_client_conn=max_client_conn, user=user, settings=settings)
        running = Pooler(folder, port, user)
        running.start()
        try:
            yield running
        finally:
            running.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    import sys

    with pooler(sys.argv[1]) as running:
        print(running.url(urlsplit(sys.argv[1]).path.lstrip("/") or "postgres"), flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
