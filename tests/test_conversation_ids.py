"""One rule for a new conversation's id, on both backends (limits.conversation_id): 1 to 256
characters, none a control character (NUL among them), a lone surrogate or a line or
paragraph separator. Every way a conversation is made keeps it: ``create_conversation``,
``fork``'s new id, an import (``-c``, a folder's ``base_state.json`` id, a file's name),
``append --create``, and the replay's scratch (which shortens its own ids to fit).

Before: an id that does not compress (12,000 CJK characters) was past what PostgreSQL's index
on ids holds, and the commands failed "cleanly" with advice to run them again, which failed
the same way, while SQLite took it; ``create_conversation("a\\0b")`` was psycopg's DataError.
A refused id is one line naming it (cut for display), nothing written; ids an older SQLite
file holds are read whatever they are.
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from openhands_memory import limits
from openhands_memory.cli import cli
from openhands_memory.conversation import EventStore
from openhands_memory.errors import BadConversationId, ConversationNotFound
from openhands_memory.io.common import append_events
from openhands_memory.io.importer import import_path
from openhands_memory.replay.run import scratch_id as replay_id

from . import factories as f


def tool_pair(call: str, response: str, output: str) -> list:
    return [f.action(response, call, args={"command": "ls"}), f.observation(call, output)]


def noise(n: int, seed: int = 7) -> str:
    """CJK text that does not compress: 3 bytes of UTF-8 a character, as the index sees it."""
    return "".join(map(chr, random.Random(seed).choices(range(0x4E00, 0x9FFF), k=n)))


REFUSED = {
    "empty": ("", "it is empty"),
    "NUL": ("a\0b", "a control character (U+0000 at character 2)"),
    "newline": ("fix\nbug", "a control character (U+000A at character 4)"),
    "escape": ("\x1b[31mred", "a control character (U+001B at character 1)"),
    "DEL": ("x\x7f", "a control character (U+007F"),
    "C1": ("x\x85", "a control character (U+0085"),
    "lone surrogate": ("x\udcff", "a lone surrogate, which is not text (U+DCFF"),
    "line separator": ("a\u2028b", "a line separator (U+2028"),
    "257 characters": ("x" * 257, "257 characters long, and an id has at most 256"),
    "12,000 CJK": (noise(12_000), "12,000 characters long"),
}
TAKEN = {
    "a UUID": str(uuid.uuid4()),
    "256 CJK characters": noise(256),
    "a replay's": "replay:demo:1",
    "spaces and punctuation": "fix bug #42: parser (retry) — ünïcode 🔥",
    "a file name of 255 bytes": "n" * 255,
}


def state(store: EventStore) -> list:
    """What a refused id must leave as it was: every conversation and event row."""
    with store.reading() as db:
        return (db.all("SELECT id, metadata FROM conversation ORDER BY id")
                + db.all("SELECT conversation_id, id, payload FROM event ORDER BY conversation_id, id"))


@pytest.fixture
def store(database_url):
    with EventStore(database_url) as s:
        source = s.create_conversation("source")
        source.append_many([f.system(), f.user("hello"), *tool_pair("c1", "r1", "out")])
        yield s


def one_line_naming(error: BaseException, cid: str, why: str) -> None:
    text = str(error)
    assert "\n" not in text and "\r" not in text and why in text, text
    assert len(text) < 400, text  # the id is cut for display, not printed whole
    assert repr(cid[:20])[1:-1] in text or cid == "", text
    assert text.endswith("nothing was written"), text


@pytest.mark.parametrize("cid, why", REFUSED.values(), ids=REFUSED.keys())
def test_every_way_a_conversation_is_made_refuses_an_id_that_breaks_the_rule(store, tmp_path, cid, why):
    before = state(store)
    events = tmp_path / "events.jsonl"
    events.write_text(f.user("imported").model_dump_json(exclude_none=True) + "\n")
    makers = {
        "create_conversation": lambda: store.create_conversation(cid),
        "fork": lambda: store.fork("source", 1, cid),
        "conversation.fork": lambda: store.conversation("source").fork(conversation_id=cid),
        "import": lambda: import_path(store, events, cid),
        "import in children": lambda: import_path(store, events, cid, parallel=True),
        "append --create": lambda: append_events(store, cid, [(f.user("x"), "line 1")], create=True),
    }
    for name, make in makers.items():
        with pytest.raises(BadConversationId) as refused:
            make()
        one_line_naming(refused.value, cid, why)
        assert state(store) == before, name


@pytest.mark.parametrize("cid", TAKEN.values(), ids=TAKEN.keys())
def test_ids_within_the_rule_are_taken_and_work_on_both_backends(store, cid):
    """256 characters that do not compress fit PostgreSQL's indexes, beside an event's own id."""
    conv = store.create_conversation(cid)
    conv.append_many([f.user("find the frobnicator"), *tool_pair("c1", "r1", "frobnicator output")])
    assert store.conversation(cid).view().seqs == [0, 1, 2]
    assert sorted(h.seq for h in conv.search("frobnicator", scope="all")) == [0, 2]
    copy = store.fork(cid, 2, cid[:-2] + "-2")
    assert len(copy) == 3
    store.delete_conversation(cid)
    assert cid not in store


def test_an_sdk_folder_whose_id_breaks_the_rule_is_refused(store, tmp_path):
    """A folder's ``base_state.json`` names the conversation: its id is judged as any other."""
    folder = tmp_path / "conv"
    (folder / "events").mkdir(parents=True)
    event = f.user("hi")
    (folder / "events" / f"event-00000-{event.id}.json").write_text(event.model_dump_json(exclude_none=True))
    bad = noise(1000)
    (folder / "base_state.json").write_text(json.dumps({"id": bad}))
    before = state(store)
    with pytest.raises(BadConversationId, match="1,000 characters long"):
        import_path(store, folder)
    assert state(store) == before
    assert import_path(store, folder, "given").conversation_id == "given"  # -c gives one that fits


def test_looking_up_an_id_no_database_holds_is_not_found(store):
    """A NUL (which PostgreSQL's text cannot hold) or a lone surrogate (which neither
    database stores) names no conversation: as any id not stored, not the driver's error."""
    for cid in ("a\0b", "\ud800"):
        assert cid not in store and not store.has_conversation(cid)
        for lookup in (store.conversation, store.find_conversation, store.delete_conversation, store.fork):
            with pytest.raises(ConversationNotFound):
                lookup(cid)


def test_an_older_sqlite_file_with_longer_ids_is_read_and_replayed(tmp_path):
    """The rule is for new ids: a file made before it may hold any, and reads, forks (under a
    new id) and replays (under a shortened scratch id) go on working."""
    path = tmp_path / "old.db"
    with EventStore(path) as store:
        store.create_conversation("placeholder").append_many([f.system(), f.user("hi"), *tool_pair("c", "r", "o")])
    long_id = noise(3000)
    conn = sqlite3.connect(path)  # as a version before the rule wrote it: every row of the id
    conn.execute("UPDATE conversation SET id = ? WHERE id = 'placeholder'", (long_id,))
    tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
              if any(c[1] == "conversation_id" for c in conn.execute(f'PRAGMA table_info("{t}")'))]
    for table in tables:
        conn.execute(f'UPDATE "{table}" SET conversation_id = ? WHERE conversation_id = ?', (long_id, "placeholder"))
    conn.commit()
    conn.close()
    with EventStore(path) as store:
        conv = store.conversation(long_id)
        assert conv.view().seqs == [0, 1, 2, 3]
        assert store.find_conversation(long_id[:40]) == long_id
        assert len(conv.fork(conversation_id="copy")) == 4
        with pytest.raises(BadConversationId):
            conv.fork(conversation_id=long_id + "x")
        from openhands_memory.condensers import NoOpCondenser

        report = conv.replay([("noop", NoOpCondenser())])
        assert report.conversation == long_id
    digest = hashlib.sha256(long_id.encode()).hexdigest()[:32]
    assert replay_id(long_id, 1) == f"replay:sha256-{digest}:1"
    assert limits.conversation_id_problem(replay_id(long_id, 1)) is None
    assert replay_id("demo", 1) == "replay:demo:1"


# --- the commands: the library's error, as one line ------------------------------------------


def invoke(*args: object):
    return CliRunner().invoke(cli, [str(a) for a in args], env={"COLUMNS": "80"})


@pytest.mark.parametrize("cid, why", [REFUSED["12,000 CJK"], REFUSED["escape"], ("a\tb", "U+0009")],
                         ids=["12,000 CJK", "escape", "tab"])
def test_commands_show_the_librarys_refusal_as_one_line(database_url, tmp_path, cid, why):
    with EventStore(database_url) as store:
        store.create_conversation("source").append_many([f.system(), f.user("hello")])
        before = state(store)
    events = tmp_path / "events.jsonl"
    events.write_text(f.user("more").model_dump_json(exclude_none=True) + "\n")
    for args in (["fork", database_url, "source", "--as", cid], ["append", database_url, cid, events, "--create"]):
        result = invoke(*args)
        assert result.exit_code == 1, result.output
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: ") and "cannot be a conversation's id" in lines[0]
        assert why in lines[0] and "Traceback" not in result.output and result.stdout == ""
    with EventStore(database_url) as store:
        assert state(store) == before


def test_the_sdk_file_store_makes_ids_within_the_rule():
    """DatabaseFileStore takes the SDK's conversation id as a UUID, always within the rule."""
    assert limits.conversation_id_problem(str(uuid.UUID(int=2**128 - 1))) is None
