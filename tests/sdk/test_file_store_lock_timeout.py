"""DatabaseFileStore.lock(path, timeout) keeps the SDK's contract on SQLite and PostgreSQL:
against a holder in another process it raises ``TimeoutError`` once ``timeout`` has passed
(and the SDK's ``EventLog.append`` with it), gets the lock as soon as the holder lets go
before then, and is neither cut short nor stretched by the connection's own wait settings
(SQLite's busy timeout, PostgreSQL's lock_timeout)."""

from __future__ import annotations

import multiprocessing
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from openhands.sdk.conversation import event_store
from openhands.sdk.conversation.event_store import EventLog
from openhands.sdk.event import MessageEvent
from openhands.sdk.llm import Message, TextContent

from openhands_memory import database
from openhands_memory.integrations.openhands_sdk import DatabaseFileStore

LOCK = "events/.eventlog.lock"
#: How far past its timeout a wait may end (the holder is another process on a busy machine).
LATE = 0.5


def message(text: str) -> MessageEvent:
    return MessageEvent(source="user", llm_message=Message(role="user", content=[TextContent(text=text)]))


def _hold(url: str, cid: str, ready, release, hold: float) -> None:
    """In another process, as another SDK agent would: take the log's lock, wait until
    ``release`` is set or ``hold`` seconds have passed, and append an event under it."""
    fs = DatabaseFileStore(url, cid)
    log = EventLog(fs)
    with fs.lock(LOCK):
        ready.set()
        release.wait(hold)
        log.append(message("the holder's"))  # (re-enters the lock it holds)
    fs.close()


@contextmanager
def holder(url: str, cid: str, hold: float) -> Iterator[multiprocessing.synchronize.Event]:
    """The holding process (``_hold``); yields the event that lets it go. Forked while this
    process has no connection of its own open, so that it inherits none."""
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
    cid = str(uuid.uuid4())
    fs = DatabaseFileStore(url, cid)
    fs.write("base_state.json", "{}")
    EventLog(fs).append(message("first"))
    fs.close()
    return cid


def _texts(url: str, cid: str) -> list[str]:
    fs = DatabaseFileStore(url, cid)
    try:
        return [e.llm_message.content[0].text for e in EventLog(fs)]
    finally:
        fs.close()


def _timed(call: Callable[[], object]) -> tuple[float, BaseException | None]:
    start = time.monotonic()
    try:
        call()
    except TimeoutError as e:
        return time.monotonic() - start, e
    return time.monotonic() - start, None


def _lock(fs: DatabaseFileStore, timeout: float) -> Callable[[], None]:
    def take() -> None:
        with fs.lock(LOCK, timeout=timeout):
            raise AssertionError("the lock was taken while another connection held it")
    return take


def test_lock_raises_timeout_error_once_its_timeout_has_passed(database_url):
    cid = _conversation(database_url)
    with holder(database_url, cid, hold=30) as release:
        fs = DatabaseFileStore(database_url, cid)
        waited, error = _timed(_lock(fs, 1))
        assert isinstance(error, TimeoutError), error
        assert 1 - 0.05 <= waited <= 1 + LATE
        assert str(error).startswith(f"Lock acquisition timed out: {LOCK} (")
        release.set()
    fs.close()
    assert _texts(database_url, cid) == ["first", "the holder's"]


def test_lock_is_taken_when_the_holder_lets_go_before_the_timeout(database_url):
    cid = _conversation(database_url)
    with holder(database_url, cid, hold=1.5):
        fs = DatabaseFileStore(database_url, cid)
        log = EventLog(fs)
        start = time.monotonic()
        with fs.lock(LOCK, timeout=5):
            waited = time.monotonic() - start
            log.append(message("mine"))  # the holder's event is seen under the lock
    fs.close()
    assert 1.0 <= waited <= 1.5 + LATE
    assert _texts(database_url, cid) == ["first", "the holder's", "mine"]


def test_the_timeout_is_neither_capped_nor_stretched_by_the_connections_own_wait(database_url, monkeypatch):
    """The connection's own wait at 0.3 s (SQLite's busy timeout, PostgreSQL's lock_timeout):
    a 0.8 s timeout waits 0.8 s, a 4 s one waits the 1.5 s holder out, as the SDK's 30 s
    waits out a 35 s holder where SQLite's own 30 s busy timeout would have given up."""
    cid = _conversation(database_url)
    if database_url.startswith("postgresql"):
        monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=300")
    else:
        monkeypatch.setattr(database, "BUSY_TIMEOUT_MS", 300)
    with holder(database_url, cid, hold=1.5):
        fs = DatabaseFileStore(database_url, cid)
        start = time.monotonic()
        waited, error = _timed(_lock(fs, 0.8))
        assert isinstance(error, TimeoutError) and 0.8 - 0.05 <= waited <= 0.8 + LATE
        with fs.lock(LOCK, timeout=4):
            got = time.monotonic() - start
            EventLog(fs).append(message("mine"))
        assert 1.0 <= got <= 1.5 + LATE
    fs.close()
    assert _texts(database_url, cid) == ["first", "the holder's", "mine"]


def test_the_sdks_event_log_append_gets_timeout_error_and_writes_nothing(database_url, monkeypatch):
    monkeypatch.setattr(event_store, "LOCK_TIMEOUT_SECONDS", 1)  # the SDK's 30 s, shortened
    cid = _conversation(database_url)
    with holder(database_url, cid, hold=30) as release:
        fs = DatabaseFileStore(database_url, cid)
        log = EventLog(fs)
        waited, error = _timed(lambda: log.append(message("mine")))
        assert isinstance(error, TimeoutError) and 1 - 0.05 <= waited <= 1 + LATE
        assert len(log) == 1
        release.set()
    log.append(message("after"))  # the log goes on once the lock is free
    fs.close()
    assert _texts(database_url, cid) == ["first", "the holder's", "after"]


def test_another_thread_holding_the_store_counts_against_the_timeout(database_url):
    cid = _conversation(database_url)
    fs = DatabaseFileStore(database_url, cid)
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        with fs.lock(LOCK):
            taken.set()
            done.wait(30)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert taken.wait(30)
        waited, error = _timed(_lock(fs, 0.5))
        assert isinstance(error, TimeoutError) and 0.5 - 0.05 <= waited <= 0.5 + LATE
    finally:
        done.set()
        thread.join()
    with fs.lock(LOCK, timeout=0):  # free again: no wait needed
        pass
    fs.close()
