"""PostgreSQL failing under the library and the commands: real servers, real faults.

* the server ends a session (``pg_terminate_backend``) between calls and in the middle of
  one (a statement held back by a lock another session holds, then its backend ended);
* a server restarted ``-m fast`` and ``-m immediate`` under a command (a server of the test's
  own: the shared one is never restarted);
* a COMMIT whose answer never comes: a server that waits for a synchronous standby that does
  not exist, whose waiting backend is then ended (the commit has landed; the client cannot
  know);
* ``statement_timeout`` and ``lock_timeout`` from the URL's options, and ``pg_cancel_backend``;
* a listener that accepts connections and never answers.

What each asserts: a read retries once and succeeds; a write raises the library's error,
saying whether it may have landed and how to check, and never lands twice; the store works
again without being reopened; each command prints one ``Error:`` line and exits 1, or
succeeds; nothing reported committed is missing; ``doctor --full`` is healthy afterwards.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from openhands_memory.errors import (
    ConnectionLost,
    ConnectTimeout,
    StatementCancelled,
    StatementTimeout,
)
from openhands_memory import EventStore

from .. import factories as f
from ..backends import start_server
from ..sdk_shape import sdk_history
from .conftest import REPO, CliRun, run_cli

psycopg = pytest.importorskip("psycopg")

CONV = "conv-1"
#: Bounds on waiting for a fault to take hold (never reached when things work).
PATIENCE = 60


# --- injecting -------------------------------------------------------------------------------


def wait_for(what: str, probe: Callable[[], Any]) -> Any:
    """``probe()``'s first truthy answer (polled; a bound, not a measurement)."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def admin(url: str) -> Any:
    return psycopg.connect(url, autocommit=True)


def dbname(url: str) -> str:
    return url.split("?", 1)[0].rsplit("/", 1)[1]


def waiting(url: str, event_type: str = "Lock") -> list[int]:
    """The backends of ``url``'s database waiting on ``event_type`` (a lock, SyncRep)."""
    with admin(url) as conn:
        return [r[0] for r in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid() "
            "AND (wait_event_type = %s OR wait_event = %s)", (dbname(url), event_type, event_type))]


def terminate(url: str, pids: list[int]) -> None:
    """End those sessions, and wait until they are gone (PostgreSQL >= 14 waits for us)."""
    with admin(url) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s, 30000)", (pid,))


@contextmanager
def holding(url: str, statement: str) -> Iterator[Any]:
    """Another session holds the lock ``statement`` takes until the block ends."""
    conn = psycopg.connect(url)
    try:
        conn.execute(statement)
        yield conn
    finally:
        try:
            conn.rollback()
        except psycopg.OperationalError:  # the server ended it (a restart): the lock is gone
            pass
        conn.close()


LOCK_EVENTS = "LOCK TABLE event IN ACCESS EXCLUSIVE MODE"  # holds back every read of event


def lock_conversation(cid: str) -> str:  # holds back every write to the conversation
    return f"SELECT id FROM conversation WHERE id = '{cid}' FOR UPDATE"


class Background:
    """``fn()`` in a thread: its result or its exception."""

    def __init__(self, fn: Callable[[], Any]):
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self.result = fn()
        except BaseException as e:  # noqa: BLE001  (looked at by the test)
            self.error = e

    def join(self) -> "Background":
        self.thread.join(PATIENCE)
        assert not self.thread.is_alive(), "the call never returned"
        return self


def start_cli(*args: object, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``openhands-memory ARGS`` started in a subprocess (``run_cli``'s environment)."""
    full_env = {**os.environ, "COLUMNS": "80", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.Popen([sys.executable, "-m", "openhands_memory.cli", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env, cwd=REPO)


def finish(proc: subprocess.Popen) -> CliRun:
    out, err = proc.communicate(timeout=PATIENCE * 2)
    return CliRun(proc.returncode, out, err)


def ok_or_one_error(run: CliRun) -> str | None:
    """The command succeeded (None), or failed with one Error line (that line)."""
    if run.code == 0:
        run.ok()
        return None
    return run.one_error_line()


# --- databases -------------------------------------------------------------------------------


def fill(url: str, steps: int = 120) -> int:
    """An SDK-shaped conversation CONV; the number of its events."""
    events = list(sdk_history(steps, seed=7))
    with EventStore(url) as store:
        store.create_conversation(CONV).append_many(events)
    return len(events)


def count(url: str) -> int:
    with EventStore(url, readonly=True) as store:
        return len(store.conversation(CONV))


def healthy(url: str) -> None:
    run = run_cli("doctor", url, "--full").ok()
    assert "is healthy" in run.stdout, run.stdout


@pytest.fixture
def pg(postgres_database_factory) -> tuple[str, int]:
    """A database on the shared server holding CONV, and its number of events."""
    url = postgres_database_factory()
    return url, fill(url)


def with_options(url: str, *settings: str) -> str:
    """``url`` with libpq start-up options (``-c name=value`` each)."""
    from urllib.parse import quote

    return f"{url}{'&' if '?' in url else '?'}options={quote(' '.join(f'-c {s}' for s in settings))}"


@dataclass
class OwnServer:
    """A throwaway server of this module's own, which a test may restart. It waits for a
    synchronous standby that never comes in sessions that ask for synchronous commits."""

    url: str
    data: Path

    def database(self) -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        with admin(self.url) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url.rsplit("/", 1)[0] + f"/{name}"

    def restart(self, mode: str) -> None:
        from tools.pg_server import _as_server_user, bindir

        subprocess.run(_as_server_user([str(bindir() / "pg_ctl"), "-D", str(self.data), "-l", str(self.data.parent / "log"),
                                        "-m", mode, "-w", "-t", "120", "restart"]), check=True, capture_output=True)


@pytest.fixture(scope="module")
def own_server() -> Iterator[OwnServer]:
    from tools.pg_server import FAST

    # Commits reach the kernel before they are acknowledged (synchronous_commit=local, not
    # FAST's off): an immediate restart must not take acknowledged commits with it. A
    # session that asks for synchronous_commit=on waits for the standby that never comes.
    server, url = start_server(settings=f"{FAST} -c synchronous_commit=local -c synchronous_standby_names=nobody")
    try:
        with admin(url) as conn:
            data = Path(conn.execute("SHOW data_directory").fetchone()[0])
        yield OwnServer(url, data)
    finally:
        server.__exit__(None, None, None)


# --- the library -------------------------------------------------------------------------------


def test_postgres_reads_and_writes_after_the_server_ended_the_session(pg):
    url, n = pg
    store = EventStore(url)
    conv = store.conversation(CONV)
    expected = [e.seq for e in conv.view()]
    for call in (lambda: len(conv), lambda: [e.seq for e in conv.view()], store.conversations,
                 lambda: store.version(CONV), lambda: conv.append(f.user("after a restart"))):
        terminate(url, [store.recorder.conn.info.backend_pid])
        call()  # a new connection, without a word
    assert len(conv) == n + 1
    assert [e.seq for e in conv.view()] == [*expected, n]
    store.close()
    healthy(url)


def test_postgres_read_ended_mid_statement_runs_again_on_a_new_connection(pg):
    url, n = pg
    with EventStore(url) as fresh:
        expected = [e.seq for e in fresh.conversation(CONV).view()]
    store = EventStore(url)
    conv = store.conversation(CONV)
    with holding(url, LOCK_EVENTS) as lock:
        reader = Background(conv.view)
        terminate(url, wait_for("the view to wait for the lock", lambda: waiting(url)))
        lock.rollback()  # the read, run again, goes through
    reader.join()
    assert reader.error is None, reader.error
    assert [e.seq for e in reader.result] == expected
    assert len(conv) == n
    store.close()


def test_postgres_read_ended_inside_a_callers_transaction_raises_then_works(pg):
    url, n = pg
    store = EventStore(url)
    with pytest.raises(ConnectionLost) as lost:
        with store.reading() as db:
            assert db.last_seq(CONV) == n - 1  # the snapshot is taken
            terminate(url, [store.recorder.conn.info.backend_pid])
            db.conversations()  # a second statement cannot run in another snapshot
    message = str(lost.value)
    assert "connection to the server was lost while reading" in message
    assert "nothing was written" in message and "\n" not in message
    assert len(store.conversation(CONV)) == n  # usable again, not reopened
    store.close()


def test_postgres_write_ended_mid_statement_raises_and_never_lands_twice(pg):
    url, n = pg
    store = EventStore(url)
    conv = store.conversation(CONV)
    conv.append(f.user("first"))  # (the append's statements are prepared: it waits in one round trip)
    n += 1
    with holding(url, LOCK_EVENTS) as lock:
        writer = Background(lambda: conv.append(f.user("held back")))
        terminate(url, wait_for("the append to wait for the lock", lambda: waiting(url)))
        lock.rollback()
    writer.join()
    assert isinstance(writer.error, ConnectionLost), writer.error
    message = str(writer.error)
    assert "lost while writing" in message
    # The append's Sync (its commit) had gone out: the message cannot know, and says how to
    # find out. Here the server was stopped before the insert ran: nothing landed.
    assert f"may have been committed; run `openhands-memory history {url} {CONV}` to check" in message
    assert "never retried" in message
    assert count(url) == n
    assert conv.append(f.user("again")) == n  # the store works again; ids stay gap-free
    store.close()
    healthy(url)


@pytest.mark.parametrize("then", ["insert", "read"])
def test_postgres_write_transaction_ended_before_commit_says_nothing_was_written(pg, then):
    """Ended inside a write transaction: its next statement fails, a read inside it too
    (which must never run on a new connection, outside the transaction)."""
    url, n = pg
    store = EventStore(url)
    conv = store.conversation(CONV)
    with pytest.raises(ConnectionLost) as lost:
        with conv.writing() as w:
            terminate(url, [store.recorder.conn.info.backend_pid])
            if then == "read":
                store.has_conversation(CONV)
            w.append([f.user("never committed")])
    assert "lost while writing" in str(lost.value)
    assert "nothing was written (the server rolled the transaction back)" in str(lost.value)
    assert count(url) == n
    assert conv.append(f.user("again")) == n
    store.close()


@pytest.mark.parametrize("events", [1, 80], ids=["pipelined-append", "copy-and-commit"])
def test_postgres_commit_without_an_answer_may_have_landed(own_server, events):
    """The server commits, then waits for a standby that never comes; its session is then
    ended. The write landed; the client is told it may have, and how to check."""
    url = own_server.database()
    n = fill(url, steps=20)
    synchronous = with_options(url, "synchronous_commit=on")
    store = EventStore(synchronous)
    conv = store.conversation(CONV)
    new = [f.user(f"landed {k}") for k in range(events)]
    writer = Background(lambda: conv.append_many(new))
    terminate(url, wait_for("the commit to wait for the standby", lambda: waiting(url, "SyncRep")))
    writer.join()
    assert isinstance(writer.error, ConnectionLost), writer.error
    message = str(writer.error)
    check = f"openhands-memory history {shlex.quote(synchronous)} {CONV}"
    assert f"may have been committed; run `{check}` to check" in message, message
    assert count(url) == n + events  # it had landed, once
    assert len(conv) == n + events  # and the store reads again
    store.close()
    healthy(url)


def test_postgres_statement_timeout_and_lock_timeout_from_the_url(pg):
    url, n = pg
    store = EventStore(with_options(url, "statement_timeout=200"))
    conv = store.conversation(CONV)
    with holding(url, LOCK_EVENTS):
        with pytest.raises(StatementTimeout) as timed_out:
            conv.view()
    assert "stopped a statement at its time limit while reading" in str(timed_out.value)
    assert "statement timeout" in str(timed_out.value) and "statement_timeout" in str(timed_out.value)
    assert len(conv.view()) > 0  # the same store, once the lock is gone
    store.close()

    store = EventStore(with_options(url, "lock_timeout=200"))
    conv = store.conversation(CONV)
    with holding(url, lock_conversation(CONV)):
        with pytest.raises(StatementTimeout) as timed_out:
            conv.append(f.user("held back"))
    assert "while writing (canceling statement due to lock timeout)" in str(timed_out.value)
    assert "nothing was written" in str(timed_out.value)
    assert conv.append(f.user("now")) == n
    store.close()


def test_postgres_cancelled_statement(pg):
    url, n = pg
    store = EventStore(url)
    conv = store.conversation(CONV)
    with holding(url, LOCK_EVENTS):
        reader = Background(lambda: len(conv))
        with admin(url) as conn:
            for pid in wait_for("the read to wait for the lock", lambda: waiting(url)):
                conn.execute("SELECT pg_cancel_backend(%s)", (pid,))
        reader.join()
    assert isinstance(reader.error, StatementCancelled), reader.error
    assert "cancelled a statement while reading (canceling statement due to user request)" in str(reader.error)
    assert len(conv) == n
    store.close()


# --- a server that never answers -------------------------------------------------------------


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A loopback listener that accepts every connection and never says a word: the URL of
    a database there."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])  # kept open, never read, never answered
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"postgresql://om@127.0.0.1:{listener.getsockname()[1]}/silent"
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        listener.close()


def test_postgres_server_that_never_answers_is_one_line_within_the_connect_timeout(silent_server):
    with pytest.raises(ConnectTimeout) as timed_out:
        EventStore(f"{silent_server}?connect_timeout=2")
    assert "did not answer within 2 s" in str(timed_out.value)
    line = run_cli("view", f"{silent_server}?connect_timeout=2", CONV, timeout=PATIENCE).one_error_line()
    assert f"{silent_server}?connect_timeout=2: cannot connect: the server did not answer within 2 s" in line
    line = run_cli("conversations", silent_server, env={"PGCONNECT_TIMEOUT": "3"}, timeout=PATIENCE).one_error_line()
    assert "did not answer within 3 s (connect_timeout; set connect_timeout=SECONDS" in line


def test_postgres_server_that_never_answers_default_connect_timeout(silent_server):
    run = run_cli("stats", silent_server, env={"PGCONNECT_TIMEOUT": ""}, timeout=PATIENCE)
    assert "did not answer within 10 s" in run.one_error_line()


# --- the commands ------------------------------------------------------------------------------


def reading_commands(url: str, tmp: Path) -> dict[str, list[object]]:
    return {
        "conversations": ["conversations", url],
        "view": ["view", url, CONV],
        "history": ["history", url, CONV],
        "export": ["export", url, CONV, "-o", tmp / f"{uuid.uuid4().hex}.jsonl"],
        "stats": ["stats", url],
        "doctor": ["doctor", url, "--full"],
        "sql": ["sql", url, "SELECT COUNT(*) FROM event"],
    }


@pytest.mark.parametrize("command", ["conversations", "view", "history", "export", "stats", "doctor", "sql"])
def test_postgres_reading_command_whose_session_is_ended(pg, tmp_path, command):
    url, n = pg
    with holding(url, LOCK_EVENTS) as lock:
        proc = start_cli(*reading_commands(url, tmp_path)[command])
        terminate(url, wait_for(f"{command} to wait for the lock", lambda: waiting(url)))
        lock.rollback()
    line = ok_or_one_error(finish(proc))
    if line is not None:
        assert "connection to the server was lost while reading" in line and "nothing was written" in line
    assert count(url) == n
    healthy(url)


def appended_file(tmp: Path, text: str) -> Path:
    path = tmp / f"{uuid.uuid4().hex}.json"
    path.write_text(f.user(text).model_dump_json(exclude_none=True))
    return path


def condensations(url: str) -> int:
    with admin(url) as conn:
        return conn.execute("SELECT COUNT(*) FROM condensation").fetchone()[0]


CONDENSE = ("--type", "amortized", "--set", "max_size=20", "--set", "keep_first=2")


@pytest.mark.parametrize("command", ["append", "condense"])
def test_postgres_writing_command_whose_session_is_ended(pg, tmp_path, command):
    url, n = pg
    before = condensations(url)
    args = (["append", url, CONV, appended_file(tmp_path, "held back")] if command == "append"
            else ["condense", url, CONV, *CONDENSE])
    # Writes wait for the conversation's lock; reads pass.
    with holding(url, lock_conversation(CONV)) as lock:
        proc = start_cli(*args)
        terminate(url, wait_for(f"{command} to wait for the lock", lambda: waiting(url)))
        lock.rollback()
    line = finish(proc).one_error_line()
    # Ended before its COMMIT was sent: the server rolled it back, and the line says so.
    assert "connection to the server was lost while writing" in line
    assert "nothing was written (the server rolled the transaction back)" in line
    assert count(url) == n and condensations(url) == before
    run_cli("append", url, CONV, appended_file(tmp_path, "again")).ok()
    assert count(url) == n + 1
    healthy(url)


def test_postgres_append_command_whose_commit_is_unanswered_says_how_to_check(own_server, tmp_path):
    url = own_server.database()
    n = fill(url, steps=20)
    synchronous = with_options(url, "synchronous_commit=on")
    proc = start_cli("append", synchronous, CONV, appended_file(tmp_path, "landed"))
    terminate(url, wait_for("the commit to wait for the standby", lambda: waiting(url, "SyncRep")))
    line = finish(proc).one_error_line()
    assert "may have been committed; run `openhands-memory history" in line
    check = line.split("run `", 1)[1].split("`", 1)[0]
    shown = run_cli(*shlex.split(check)[1:], "--format", "json").ok()
    assert json.loads(shown.stdout)[-1]["id"] == n  # the check shows the event: it landed, once
    assert count(url) == n + 1
    healthy(url)


def test_postgres_statement_timeout_in_the_url_is_one_line(pg):
    url, n = pg
    timed = with_options(url, "statement_timeout=200")
    with holding(url, LOCK_EVENTS):
        line = run_cli("view", timed, CONV).one_error_line()
    assert "stopped a statement at its time limit while reading (canceling statement due to statement timeout)" in line
    assert "statement_timeout" in line
    with holding(url, lock_conversation(CONV)):
        line = run_cli("condense", timed, CONV, *CONDENSE).one_error_line()
    assert "stopped a statement at its time limit while writing" in line
    assert "nothing was written" in line
    assert count(url) == n
    healthy(url)


@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_postgres_server_restarted_under_commands(own_server, tmp_path, mode):
    url = own_server.database()
    n = fill(url)
    for args in (["view", url, CONV], ["doctor", url, "--full"],
                 ["append", url, CONV, appended_file(tmp_path, "under a restart")]):
        with holding(url, LOCK_EVENTS):
            proc = start_cli(*args)
            wait_for(f"{args[0]} to wait for the lock", lambda: waiting(url))
            own_server.restart(mode)  # the lock's holder goes too
        line = ok_or_one_error(finish(proc))
        if args[0] == "append":
            landed = count(url) - n
            assert landed in (0, 1)
            assert line is None and landed == 1 or line is not None and "lost while writing" in line
            n += landed
        else:
            assert line is None or "lost while reading" in line
    assert count(url) == n
    run_cli("append", url, CONV, appended_file(tmp_path, "after")).ok()
    assert count(url) == n + 1
    healthy(url)
