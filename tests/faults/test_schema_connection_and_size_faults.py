"""Faults that each were a lie or a leftover and now are one clear line: a file holding two
schema revisions, a model server that is not listening, and an event over the size limit,
offered or already stored."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from openhands_memory import migrate
from openhands_memory.errors import SeveralRevisions
from openhands_memory import EventStore
from tests import factories as f

from .conftest import run_cli

# --- an alembic_version table with two rows ----------------------------------------------------


def _state(url: str) -> object:
    """Everything a refused command must leave as it was: the file's bytes, or on PostgreSQL
    the rows of alembic_version, conversation and event."""
    if "://" not in url:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(Path(url).parent.glob("*"))}
    import psycopg

    with psycopg.connect(url) as conn:
        return [conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
                for t in ("alembic_version", "conversation", "event")]


def _two_revisions(url: str) -> None:
    """A database of ours whose alembic_version holds a second, older revision."""
    with EventStore(url) as store:
        store.create_conversation("c").append_many([f.system(), f.user()])
    older = migrate.REVISIONS[0]
    if "://" not in url:
        import sqlite3

        conn = sqlite3.connect(url)
        with conn:
            conn.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (older,))
        conn.close()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO alembic_version (version_num) VALUES (%s)", (older,))


@pytest.mark.parametrize("args", [
    ("append", "{db}", "c", "{events}"), ("conversations", "{db}"), ("view", "{db}", "c"), ("migrate", "{db}"),
    ("doctor", "{db}", "--fix"),
])
def test_two_schema_revisions_are_refused_before_anything_is_written(database_url, args, tmp_path):
    _two_revisions(database_url)
    events = tmp_path / "events.jsonl"
    events.write_text(f.user("more").to_json() + "\n")
    before = _state(database_url)
    line = run_cli(*(a.format(db=database_url, events=events) for a in args)).one_error_line()
    assert "has 2 schema revisions in alembic_version" in line and migrate.REVISIONS[0] in line
    assert "left untouched" in line
    assert _state(database_url) == before
    with pytest.raises(SeveralRevisions):
        EventStore(database_url)
    assert _state(database_url) == before


# --- a model whose server is not listening -----------------------------------------------------


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed: the kernel refuses connections)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_condense_against_a_server_not_listening_says_it_could_not_connect(tmp_path):
    """It used to say `server_error (HTTP 500)`: litellm wraps the refused connection as an
    InternalServerError. No HTTP exchange happened; the line and the ledger say so, and where."""
    db = tmp_path / "agent.db"
    with EventStore(db) as store:
        events = [f.system(), f.user("fix the date parser")]
        for i in range(15):
            events += [f.action(f"r{i}", f"call{i}"), f.observation(f"call{i}")]
        store.create_conversation("c").append_many(events)
    base = f"http://127.0.0.1:{_closed_port()}/v1"
    config = tmp_path / "config.toml"
    config.write_text(f"""
[condenser]
type = "llm"
llm_config = "summarizer"
max_size = 20
keep_first = 2

[llm.summarizer]
model = "openai/test-model"
api_base = "{base}"
api_key = "sk-test"
timeout = 10
num_retries = 1
retry_min_wait = 0.01
retry_max_wait = 0.05
""")
    line = run_cli("condense", db, "c", "--config", config).one_error_line()
    assert f"openai/test-model: connection_error (could not connect to {base}) after 2 attempts" in line, line
    assert "HTTP" not in line and "server_error" not in line
    import sqlite3

    with sqlite3.connect(db) as conn:
        calls = conn.execute("SELECT outcome, error, attempts FROM llm_call").fetchall()
        assert conn.execute("SELECT COUNT(*) FROM condensation").fetchone()[0] == 0
    assert [(outcome, attempts) for outcome, _, attempts in calls] == [("connection_error", 2)]
    assert calls[0][1].startswith(f"could not connect to {base}: ") and "refused" in calls[0][1]


# --- an event larger than an import reads -------------------------------------------------------


def _observation_of_size(size: int):
    """An observation whose JSON (as stored and exported) is exactly ``size`` bytes (ASCII)."""
    short = f.observation("c1", "x")
    pad = size - len(short.model_dump_json(exclude_none=True)) + 1
    event = f.observation("c1", "x" * pad).model_copy(update={"id": short.id, "timestamp": short.timestamp})
    assert len(event.model_dump_json(exclude_none=True)) == size  # as stored (storage/codec.py)
    return event


def _count(url: str) -> int:
    with EventStore(url) as store:
        return len(list(store.conversation("c").events()))


def test_an_event_over_the_limit_is_never_written_and_one_at_it_round_trips(tmp_path):
    """A 73 MB observation used to be appended and exported, and the export then refused by
    import (64 MB a line). One limit, kept where every write builds its row: the largest event
    that can be written is exported and imported again; one byte more is refused by append
    (library and CLI), naming the event and its size, and nothing is written."""
    from openhands_memory.errors import EventTooLarge
    from openhands_memory.storage.codec import MAX_EVENT_BYTES

    db = tmp_path / "a.db"
    with EventStore(db) as store:
        conv = store.create_conversation("c")
        conv.append_many([f.system(), f.action("r1", "c1")])
        over = _observation_of_size(MAX_EVENT_BYTES + 1)
        with pytest.raises(EventTooLarge, match=rf"event {over.id} \(ObservationEvent\) is 67,108,865 bytes of "
                                                r"JSON, more than the 67,108,864 bytes \(64 MB\) an event may hold"):
            conv.append(over)
        del over
        assert len(list(conv.events())) == 2
        conv.append(_observation_of_size(MAX_EVENT_BYTES))
    exported = tmp_path / "c.jsonl"
    run_cli("export", db, "c", "-o", exported).ok()
    assert max(len(line) for line in exported.read_bytes().splitlines()) == MAX_EVENT_BYTES
    run_cli("import", tmp_path / "b.db", exported).ok()
    assert _count(str(tmp_path / "b.db")) == 3
    # The CLI: the same refusal, one line, nothing written.
    big = tmp_path / "big.jsonl"
    big.write_text(_observation_of_size(MAX_EVENT_BYTES + 1).to_json() + "\n")
    line = run_cli("append", db, "c", big).one_error_line()
    assert "64 MB" in line
    assert _count(str(db)) == 3


def test_an_old_row_over_the_limit_is_refused_by_export_naming_it(tmp_path):
    """A database written before the limit may hold a larger event: export refuses it (an
    import could not read it back) rather than write a file that cannot come back."""
    import sqlite3

    from openhands_memory.storage.codec import MAX_EVENT_BYTES

    db = tmp_path / "old.db"
    with EventStore(db) as store:
        store.create_conversation("c").append_many([f.system(), f.action("r1", "c1"), f.observation("c1")])
    conn = sqlite3.connect(db)  # as an older version wrote it
    with conn:
        conn.execute("UPDATE event SET payload = ? WHERE id = 2",
                     ('{"kind":"ObservationEvent","pad":"' + "x" * MAX_EVENT_BYTES + '"}',))
    conn.close()
    for args in (("-o", tmp_path / "c.jsonl"), ("--file-format", "openhands", "-o", tmp_path / "folder")):
        line = run_cli("export", db, "c", *args).one_error_line()
        assert "event 2 (ObservationEvent, " in line and "bytes of JSON, more than the 67,108,864 bytes" in line
        assert "nothing was exported" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.db"]
