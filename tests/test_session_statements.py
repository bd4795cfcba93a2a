"""The storage contract at the session level (``storage/contract.py``), on both backends.

``tests/test_store_on_both_backends.py`` runs the library (``EventStore``) against SQLite and
PostgreSQL; this file holds the level below it to the contract: the statements a backend's
session must run, called directly, and the written contract kept equal to what the library
calls.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from openhands_memory.conversation import EventStore
from openhands_memory.errors import ConversationNotFound
from openhands_memory.storage import Session, contract
from openhands_memory.storage.codec import event_row
from openhands_memory.storage.postgres import PostgresSession
from openhands_memory.storage.sqlite import SqliteSession

from . import factories as f

PACKAGE = Path(__file__).resolve().parent.parent / "openhands_memory"
IMPLEMENTATION = {"storage/session.py", "storage/inspection.py", "storage/sqlite.py", "storage/postgres/session.py",
                  "storage/postgres/connection.py"}
# Session's own building blocks, which nothing outside the implementation calls.
HELPERS = {"one", "all", "intervals_cte", "view_ends", "interval_statements", "over_intervals",
           "edge_statements", "batch_statements", "batch_sizes_sql", "path_statement"}


def _session_calls() -> dict[str, set[str]]:
    """Session methods called outside the implementation: ``db.name(...)`` (a session is
    always called ``db`` or ``session``), by name, with the modules that call them."""
    methods = {n for n, v in inspect.getmembers(Session, inspect.isfunction) if not n.startswith("_")}
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in IMPLEMENTATION:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in methods:
                owner = node.value
                name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
                if name in ("db", "session"):
                    found.setdefault(node.attr, set()).add(rel)
    return found


def test_every_statement_called_is_in_the_contract():
    called = set(_session_calls())
    unlisted = called - set(contract.STATEMENTS) - set(contract.DRIVER)
    assert not unlisted, f"add these to storage/contract.py: {sorted(unlisted)}"


def test_no_statement_is_dead():
    """Every statement of ``Session`` is in the contract or one of its helpers, and every
    statement in the contract is called by the library."""
    methods = {n for n, v in inspect.getmembers(Session, inspect.isfunction) if not n.startswith("_")}
    stray = methods - set(contract.STATEMENTS) - set(contract.DRIVER) - HELPERS
    assert not stray, f"statements outside the contract: {sorted(stray)}"
    called = set(_session_calls())
    storage_internal = {"any_visible", "close_hidden", "open_hidden", "hidden_rows", "replace_hidden",
                        "hidden_live", "hidden_at", "condensations_with_ranges", "insert_condensation"}
    unused = set(contract.STATEMENTS) - called - storage_internal
    assert not unused, f"statements nothing calls (remove them): {sorted(unused)}"


@pytest.mark.parametrize("session", [SqliteSession, PostgresSession])
def test_both_backends_provide_the_contract_with_its_signatures(session):
    assert issubclass(session, Session)
    for name in contract.STATEMENTS + contract.DRIVER:
        mine = getattr(session, name, None)
        assert callable(mine), f"{session.__name__} lacks {name}"
        wanted = list(inspect.signature(getattr(contract.BackendSession, name)).parameters)
        assert list(inspect.signature(mine).parameters) == wanted, f"{session.__name__}.{name}"


def test_the_checker_sees_an_unlisted_statement(monkeypatch):
    """The contract test can fail: a statement missing from the contract is reported."""
    monkeypatch.setattr(contract, "STATEMENTS", tuple(n for n in contract.STATEMENTS if n != "last_seq"))
    with pytest.raises(AssertionError, match="last_seq"):
        test_every_statement_called_is_in_the_contract()


# --- the statements, on both backends ----------------------------------------------------


def _rows(cid: str, first: int, events: list) -> list[tuple]:
    return [event_row(cid, first + k, e) for k, e in enumerate(events)]


def test_conversation_statements(database_url):
    with EventStore(database_url) as store:
        rec = store.recorder
        with rec.writing() as db:
            db.insert_conversation("alpha", "2026-01-01T00:00:00", {"n": 1})
            db.insert_conversation("alpine", "2026-01-02T00:00:00", {})
        assert isinstance(rec.session(), contract.BackendSession)
        with rec.reading() as db:
            assert db.conversation_exists("alpha") and not db.conversation_exists("beta")
            assert [c for c, _, _ in db.conversations()] == ["alpha", "alpine"]
            assert sorted(db.conversation_ids_like("alp", 6)) == ["alpha", "alpine"]
            assert db.metadata("alpha") == {"n": 1} and db.metadata("beta") is None
        with rec.writing("alpha") as db:
            db.set_metadata("alpha", {"n": 2})
            assert db.delete_conversation("alpine") is True
            assert db.delete_conversation("beta") is False
        with rec.reading() as db:
            assert db.metadata("alpha") == {"n": 2}
            assert [c for c, _, _ in db.conversations()] == ["alpha"]


def test_event_statements(database_url):
    with EventStore(database_url) as store:
        rec = store.recorder
        events = [f.system(), f.user(), f.action("r", "c1"), f.action("r", "c2"), f.observation("c1")]
        with rec.writing() as db:
            db.insert_conversation("c", "2026-01-01T00:00:00", {})
        with rec.writing("c") as db:
            assert db.last_seq("c") == -1
            db.insert_events(_rows("c", 0, events))
            assert db.last_seq("c") == 4 and db.last_seq("c", upto=2) == 2
        with rec.reading() as db:
            kind, payload = db.event("c", 1)
            assert kind == "MessageEvent" and events[1].id in payload
            assert db.event("c", 9) is None
            assert [r[0] for r in db.event_page("c", 1, 4, 10)] == [1, 2, 3]
            assert [r[0] for r in db.event_page("c", 0, 5, 2)] == [0, 1]
            assert db.event_page("c", 0, 5, 10, kinds=["ActionEvent"], columns="id, uid") == [
                (2, events[2].id), (3, events[3].id)]
            assert db.seqs_of("c", 5, [events[4].id, "nope"]) == [(4, events[4].id)]
            assert db.seqs_of("c", 4, [events[4].id]) == []  # only ids before ``before`` count
            assert db.batch_sizes("c", 4, {"r", "other"}) == {"r": 2}
            assert db.batch_sizes("c", 2, {"r"}) == {"r": 1}


def test_token_count_statements(database_url):
    with EventStore(database_url) as store:
        rec = store.recorder
        with rec.writing() as db:
            db.insert_conversation("c", "2026-01-01T00:00:00", {})
            db.insert_events(_rows("c", 0, [f.system(), f.user(), f.user()]))
            db.set_token_counts("c", [(0, 7), (2, 9)])
        with rec.reading() as db:
            assert db.token_counts("c", [(0, 2)]) == {0: 7, 1: None, 2: 9}
            assert db.token_counts("c", [(1, 1)]) == {1: None}
        with rec.writing("c") as db:
            db.clear_token_counts("c")
        with rec.reading() as db:
            assert db.token_counts("c", [(0, 2)]) == {0: None, 1: None, 2: None}


def test_touch_tells_another_connection_that_we_wrote(database_url):
    with EventStore(database_url) as mine, EventStore(database_url) as theirs:
        with mine.recorder.writing() as db:
            db.insert_conversation("c", "2026-01-01T00:00:00", {})
        seen = theirs.recorder.version("c")
        with mine.recorder.writing("c") as db:
            db.insert_events(_rows("c", 0, [f.user()]))
            left = db.touch("c")
        assert theirs.recorder.version("c") != seen
        assert mine.recorder.version("c") == left  # our own write leaves what touch said


def test_file_and_base_state_statements(database_url):
    with EventStore(database_url) as store:
        rec = store.recorder
        with rec.writing() as db:
            db.insert_conversation("c", "2026-01-01T00:00:00", {})
            assert db.set_base_state("c", '{"id": 1}') is True
            assert db.set_base_state("missing", "{}") is False
            for path in ("a/x", "a/y", "a/b/z", "ab"):
                db.put_file("c", path, path.encode(), "2026-01-01T00:00:00")
            db.put_file("c", "a/x", b"again", "2026-01-02T00:00:00")
        with rec.reading() as db:
            assert db.base_state("c") == '{"id": 1}'
            assert db.file_content("c", "a/x") == b"again" and db.file_content("c", "nope") is None
            assert db.file_paths("c", "a/") == ["a/b/z", "a/x", "a/y"]
        with rec.writing("c") as db:
            assert db.delete_files("c", "a") == 3  # the folder and everything under it
        with rec.reading() as db:
            assert db.file_paths("c", "") == ["ab"]


def test_a_write_without_its_conversation_is_refused_by_the_library_not_the_driver(database_url):
    """``last_seq`` of a missing conversation is -1 (not an error): the writing context
    tells a missing conversation from an empty one."""
    with EventStore(database_url) as store:
        with store.recorder.reading() as db:
            assert db.last_seq("ghost") == -1 and not db.conversation_exists("ghost")
        conv = store.create_conversation("c")
        store.delete_conversation("c")
        with pytest.raises(ConversationNotFound):
            with conv.writing() as w:
                w.append([f.user()])
