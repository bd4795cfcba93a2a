"""A NUL in an event's identifier (its id, tool_call_id, tool_name, llm_response_id or
parent_id): one rule on both backends (storage/codec.py, ``IDENTIFIERS``). Such an event is
refused whole, with one line naming the field, and nothing written, through every way an
event is written: an append, a batch (PostgreSQL's one-statement INSERT and its COPY past 64
events), ``Conversation.writing``, a JSON Lines import (in this process and in children, where
msgspec's quick rows leave it to pydantic), an SDK folder import, the ``append`` command. A
lookup by such a value (a Condensation's forgotten ids, a pin's event id) names nothing, on
PostgreSQL too, where the server refused to compare it.

Before: PostgreSQL stored ``ter\\0m`` as ``ter`` in the column while the JSON kept it whole
(silently: data corruption), then ``conv.read`` pairing a result with its call and every
lookup by the JSON's value raised psycopg's DataError; SQLite stored it whole.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from openhands_memory.cli import cli
from openhands_memory.conversation import EventStore
from openhands_memory.errors import UnstorableIdentifier
from openhands_memory.events import Event, PinEvent
from openhands_memory.io.common import ImportFailed
from openhands_memory.io.importer import import_path

from . import factories as f

#: More events than PostgreSQL's one-statement append takes: the rest go by COPY.
BATCH = 100
NUL = "ter\0m"


def bad_event(field: str) -> Event:
    """An event whose ``field`` holds a NUL (its other identifiers as usual)."""
    if field == "id":
        return f.user("hello").model_copy(update={"id": "ev\0x"})
    if field == "parent_id":
        return f.user("hello").model_copy(update={"parent_id": "p\0x"})
    if field == "tool_call_id":
        return f.action("r-bad", NUL)
    if field == "tool_name":
        return f.action("r-bad", "c-bad", tool=NUL)
    return f.action(NUL, "c-bad")  # llm_response_id


FIELDS = ["id", "tool_call_id", "tool_name", "llm_response_id", "parent_id"]


def state(store: EventStore) -> list:
    with store.reading() as db:
        return (db.all("SELECT id FROM conversation ORDER BY id")
                + db.all("SELECT conversation_id, id, uid, tool_call_id, tool_name, llm_response_id, payload "
                         "FROM event ORDER BY conversation_id, id"))


def pair(i: int) -> list[Event]:
    return [f.action(f"r{i}", f"c{i}", args={"command": f"ls {i}"}), f.observation(f"c{i}", f"out {i}")]


@pytest.fixture
def store(database_url):
    with EventStore(database_url) as s:
        conv = s.create_conversation("c")
        conv.append_many([f.system(), f.user("task"), *pair(0)])
        yield s


def refused_naming(error: BaseException, field: str) -> None:
    text = str(error)
    assert "\n" not in text and f"{field} " in text and "\\x00" in text and "NUL" in text, text


@pytest.mark.parametrize("field", FIELDS)
def test_every_append_refuses_the_event_whole(store, field):
    conv = store.conversation("c")
    before = state(store)
    attempts = {
        "append": lambda: conv.append(bad_event(field)),
        "a batch of two (one INSERT)": lambda: conv.append_many([f.user("first"), bad_event(field)]),
        f"a batch of {BATCH} (COPY)": lambda: conv.append_many(
            [f.user(f"u{i}") for i in range(BATCH // 2)] + [bad_event(field)] + [f.user(f"v{i}") for i in range(BATCH // 2)]),
        "writing()": lambda: _in_writing(conv, field),
    }
    for name, attempt in attempts.items():
        with pytest.raises(UnstorableIdentifier) as refused:
            attempt()
        refused_naming(refused.value, field)
        assert refused.value.field == field
        assert state(store) == before, name
    # The conversation goes on, and its own identifiers are found as before.
    conv.append_many(pair(1))
    assert conv.read(5).pair == 4 and conv.read(4).pair == 5


def _in_writing(conv, field: str) -> None:
    with conv.writing() as w:
        w.append([f.user("kept only with the rest")])
        w.append([bad_event(field)])


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("parallel", [False, True], ids=["in process", "in children"])
def test_a_json_lines_import_names_the_line(store, tmp_path, field, parallel):
    lines = [e.model_dump_json(exclude_none=True) for e in (f.system(), *pair(0), bad_event(field), *pair(1))]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    before = state(store)
    with pytest.raises(ImportFailed) as refused:
        import_path(store, path, "imported", parallel=parallel)
    assert str(refused.value).startswith(f"{path}:4: the event's {field} "), str(refused.value)
    refused_naming(refused.value, field)
    assert state(store) == before


@pytest.mark.parametrize("field", [f for f in FIELDS if f != "id"])  # (a file name holds no NUL)
def test_an_sdk_folder_import_names_the_file(store, tmp_path, field):
    folder = tmp_path / "conv" / "events"
    folder.mkdir(parents=True)
    for k, event in enumerate([f.system(), *pair(0), bad_event(field)]):
        (folder / f"event-{k:05d}-{event.id}.json").write_text(event.model_dump_json(exclude_none=True))
    before = state(store)
    with pytest.raises(ImportFailed) as refused:
        import_path(store, folder.parent, "imported")
    assert "event-00003-" in str(refused.value), str(refused.value)
    refused_naming(refused.value, field)
    assert state(store) == before


def test_the_append_command_says_it_in_one_line(store, tmp_path, database_url):
    path = tmp_path / "more.jsonl"
    path.write_text("\n".join(e.model_dump_json(exclude_none=True) for e in (f.user("ok"), bad_event("tool_call_id"))))
    before = state(store)
    result = CliRunner().invoke(cli, ["append", database_url, "c", str(path)], env={"COLUMNS": "80"})
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {path}:2: the event's tool_call_id 'ter\\x00m'"), lines
    assert state(store) == before


def test_a_nul_elsewhere_is_kept_whole(store):
    """The rule is for identifiers: a message's text with a NUL is stored byte for byte."""
    conv = store.conversation("c")
    seq = conv.append(f.user("binary x\0y"))
    assert conv.get(seq).llm_message.content[0].text == "binary x\0y"


# --- lookups by such a value name nothing ----------------------------------------------------


def test_ids_holding_a_nul_in_a_condensation_or_a_pin_name_nothing(store):
    """A Condensation's forgotten ids and a pin's event id are looked up by value: one holding
    a NUL names no event (none can hold one) and is ignored, as any id naming nothing is."""
    conv = store.conversation("c")
    conv.append(f.condensation(forget=[conv.get(2).id, "x\0y", conv.get(3).id]))
    assert conv.view().seqs == [0, 1]
    conv.append(PinEvent(event_id="a\0b", event_seq=1, mode="keep"))
    assert conv.view().pins.by_seq == {}
    with EventStore(store.location.url if store.location.path is None else store.location.path) as again:
        view = again.conversation("c").view()  # read anew, not from the cache
        assert view.seqs == [0, 1] and view.pins.by_seq == {}


def test_rows_written_before_the_rule_are_read_without_a_driver_error(store):
    """Rows an older version wrote: SQLite kept the value whole (the pair is found); PostgreSQL
    cut the column at the NUL while the JSON kept it (the pair is lost with the column, but
    reading the event no longer raises DataError)."""
    conv = store.conversation("c")
    conv.append_many([f.action("r9", "terXm"), f.observation("terXm", "old output")])
    postgres = store.location.path is None
    with store.writing() as db:  # as the older version left them
        column = "'ter'" if postgres else "'ter' || char(0) || 'm'"
        db.execute(f"UPDATE event SET tool_call_id = {column}, payload = replace(payload, 'terXm', ?) "
                   "WHERE conversation_id = 'c' AND tool_call_id = 'terXm'", ("ter\\u0000m",))
    with EventStore(store.location.url if postgres else store.location.path) as again:
        conv = again.conversation("c")
        assert conv.get(4).tool_call_id == "ter\0m"
        read = conv.read(5)
        assert read.pair == (None if postgres else 4)
        assert "old output" in read.text
