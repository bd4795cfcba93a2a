"""A write's ``timeout`` bounds its wait for the conversation's lock while another process
holds it, on SQLite and PostgreSQL: ``LockTimeout`` when it passes (nothing written), the
lock as soon as the holder lets go before it, and neither cut short nor stretched by the
connection's own wait settings (SQLite's busy timeout, PostgreSQL's lock_timeout)."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from openhands_memory import database
from openhands_memory.conversation import EventStore
from openhands_memory.errors import LockTimeout

from . import factories as f
from .backends import backend_of, direct_url

#: How far past its timeout a wait may end (the holder is another process on a busy machine).
LATE = 0.5


def _hold(url: str, cid: str, ready, release, hold: float) -> None:
    """In another process: hold the conversation's write lock until ``release`` is set or
    ``hold`` seconds have passed, and append one event under it."""
    with EventStore(url) as store:
        conv = store.conversation(cid)
        with conv.writing() as w:
            ready.set()
            release.wait(hold)
            w.append([f.user("the holder's")])


@contextmanager
def holder(url: str, cid: str, hold: float) -> Iterator[multiprocessing.synchronize.Event]:
    """A process that holds ``cid``'s write lock (see ``_hold``); yields the event that lets
    it go. Forked before this process opens its own store, so that it inherits no
    connection."""
    fork = multiprocessing.get_context("fork")
    ready, release = fork.Event(), fork.Event()
    process = fork.Process(target=_hold, args=(url, cid, ready, release, hold))
    process.start()
    try:
        assert ready.wait(30), "the holder never took the lock"
        yield release
    finally:
        release.set()
        process.join(30)
    assert process.exitcode == 0


def _conversation(url: str) -> str:
    with EventStore(url) as store:
        store.create_conversation("c").append(f.user("first"))
    return "c"


def _timed(call) -> tuple[float, BaseException | None]:
    start = time.monotonic()
    try:
        call()
    except LockTimeout as e:
        return time.monotonic() - start, e
    return time.monotonic() - start, None


def test_a_write_waits_for_the_lock_no_longer_than_its_timeout(database_url):
    cid = _conversation(database_url)
    with holder(database_url, cid, hold=30) as release, EventStore(database_url) as store:
        conv = store.conversation(cid)

        def write() -> None:
            with conv.writing(timeout=1) as w:
                w.append([f.user("mine")])

        waited, error = _timed(write)
        assert isinstance(error, LockTimeout), error
        assert 1 - 0.05 <= waited <= 1 + LATE
        assert error.seconds == 1 and "waited 1 s" in str(error) and "nothing was written" in str(error)
        release.set()
    with EventStore(database_url) as store:
        texts = [e.llm_message.content[0].text for e in store.conversation(cid).events()]
    assert texts == ["first", "the holder's"]


def test_a_write_takes_the_lock_once_the_holder_lets_go_before_its_timeout(database_url):
    cid = _conversation(database_url)
    with holder(database_url, cid, hold=1.5), EventStore(database_url) as store:
        conv = store.conversation(cid)
        start = time.monotonic()
        with conv.writing(timeout=5) as w:
            waited = time.monotonic() - start
            w.append([f.user("mine")])
    assert 1.0 <= waited <= 1.5 + LATE
    with EventStore(database_url) as store:
        texts = [e.llm_message.content[0].text for e in store.conversation(cid).events()]
    assert texts == ["first", "the holder's", "mine"]


def _shorter_own_wait(request, database_url: str, monkeypatch) -> None:
    """Set the connection's own wait to 0.3 s: SQLite's busy timeout, PostgreSQL's
    lock_timeout (in the session's start-up options; through a pooler, which refuses those,
    as the database's own setting, which each server session the pooler opens starts with).
    Before the database's first connection (the pooler's are kept)."""
    if backend_of(request) == "pgbouncer":
        import psycopg

        with psycopg.connect(direct_url(request, database_url), autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{database_url.rsplit("/", 1)[1]}" SET lock_timeout = 300')
    elif database_url.startswith("postgresql"):
        monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=300")
    else:
        monkeypatch.setattr(database, "BUSY_TIMEOUT_MS", 300)


def _own_wait(store: EventStore) -> str:
    """The connection's own wait setting, read inside a transaction."""
    with store.reading() as db:
        if store.recorder.backend == "postgresql":
            return db.one("SHOW lock_timeout", ())
        return f"{db.one('PRAGMA busy_timeout', ())}ms"


def test_the_timeout_is_neither_capped_nor_stretched_by_the_connections_own_wait(request, database_url,
                                                                                 monkeypatch):
    """With the connection's own wait at 0.3 s, a 0.8 s timeout waits 0.8 s, and a 4 s one
    waits the holder out (1.5 s); afterwards the connection's own setting is as it was."""
    _shorter_own_wait(request, database_url, monkeypatch)
    cid = _conversation(database_url)
    with holder(database_url, cid, hold=1.5), EventStore(database_url) as store:
        conv = store.conversation(cid)
        assert _own_wait(store) == "300ms"
        start = time.monotonic()

        def short() -> None:
            with conv.writing(timeout=0.8):
                pass

        waited, error = _timed(short)
        assert isinstance(error, LockTimeout) and 0.8 - 0.05 <= waited <= 0.8 + LATE
        with conv.writing(timeout=4) as w:
            got = time.monotonic() - start
            w.append([f.user("mine")])
            if store.recorder.backend == "postgresql":  # the rest of the transaction: the session's
                assert w.db.one("SHOW lock_timeout", ()) == "300ms"
        assert 1.0 <= got <= 1.5 + LATE
        assert _own_wait(store) == "300ms"
        assert len(conv) == 3


def test_without_a_timeout_sqlites_busy_timeout_ends_in_the_same_typed_error(tmp_path, monkeypatch):
    url = str(tmp_path / "busy.db")
    cid = _conversation(url)
    monkeypatch.setattr(database, "BUSY_TIMEOUT_MS", 300)
    with holder(url, cid, hold=30), EventStore(url) as store:
        conv = store.conversation(cid)

        def write() -> None:
            with conv.writing():
                pass

        waited, error = _timed(write)
        assert isinstance(error, LockTimeout) and error.seconds == 0.3
        assert 0.3 - 0.05 <= waited <= 0.3 + LATE
        assert "waited 0.3 s" in str(error)


@pytest.mark.parametrize("timeout", [0, -1])
def test_a_timeout_of_nothing_tries_the_lock_once(database_url, timeout):
    cid = _conversation(database_url)
    with holder(database_url, cid, hold=30), EventStore(database_url) as store:
        conv = store.conversation(cid)

        def write() -> None:
            with conv.writing(timeout=timeout):
                pass

        waited, error = _timed(write)
        assert isinstance(error, LockTimeout) and waited <= LATE
