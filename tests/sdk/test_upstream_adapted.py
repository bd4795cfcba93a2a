"""What the SDK's own tests left out of tests/sdk/upstream meant, as DatabaseFileStore keeps
it, on SQLite and PostgreSQL: an event file the store could not keep as the event it names
is refused and the log goes on; events whose ids are not UUIDs are events (the SDK counts
them when it checks for other writers); the file names past 99,999 events agree with the
SDK's reader. And the left-out list names tests that exist."""

from __future__ import annotations

import ast
import uuid
from pathlib import Path

import pytest
from openhands.sdk.conversation.event_store import EventLog
from openhands.sdk.conversation.persistence_const import EVENT_NAME_RE
from openhands.sdk.event import MessageEvent
from openhands.sdk.llm import Message, TextContent

from openhands_memory.conversation import EventStore
from openhands_memory.errors import MalformedEvent
from openhands_memory.integrations.openhands_sdk import DatabaseFileStore, paths

from .upstream.conftest import LEFT_OUT

UPSTREAM = Path(__file__).parent / "upstream"


def message(text: str, id: str | None = None) -> MessageEvent:
    extra = {} if id is None else {"id": id}
    return MessageEvent(source="user", llm_message=Message(role="user", content=[TextContent(text=text)]), **extra)


def test_every_left_out_test_is_a_test_of_the_vendored_modules():
    for (module, name), reason in LEFT_OUT.items():
        tree = ast.parse((UPSTREAM / f"{module}.py").read_text())
        names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert name in names and name.startswith("test_"), (module, name)
        assert reason


@pytest.fixture
def fs(database_url):
    store = DatabaseFileStore(database_url, uuid.uuid4())
    yield store
    store.close()


def test_an_event_file_the_store_could_not_keep_is_refused_and_the_log_goes_on(fs):
    """The left-out tests delete event files, write text that is not JSON, a gap, or JSON
    naming another event: each is refused, nothing of it is stored, and the log reads back
    and appends as before."""
    log = EventLog(fs)
    first = message("first")
    log.append(first)
    name = f"events/event-00000-{first.id}.json"
    with pytest.raises(PermissionError, match="append-only"):
        fs.delete(name)
    with pytest.raises(MalformedEvent, match="not valid JSON"):
        fs.write(f"events/event-00001-{uuid.uuid4()}.json", "invalid json content")
    later = message("later")
    with pytest.raises(ValueError, match="gap"):
        fs.write(f"events/event-00002-{later.id}.json", later.model_dump_json())
    with pytest.raises(ValueError, match="the event's id is"):
        fs.write(f"events/event-00001-{uuid.uuid4()}.json", message("seed").model_dump_json(exclude_none=True))
    again = EventLog(fs)
    assert len(again) == 1 and again[0].id == first.id
    assert fs.list("events") == [name]
    assert again.append(later) == 1
    assert [e.id for e in EventLog(fs)] == [first.id, later.id]


def test_events_whose_ids_are_not_uuids_are_events_the_length_marker_counts(database_url):
    """Two stores (two connections, as two processes) on one conversation: the second log,
    opened before the first appended, sees that append through the length marker and appends
    after it instead of over it."""
    cid = str(uuid.uuid4())
    first, second = DatabaseFileStore(database_url, cid), DatabaseFileStore(database_url, cid)
    try:
        log1, log2 = EventLog(first), EventLog(second)
        assert log1.append(message("one", id="event-1")) == 0
        assert first.exists("events/.eventlog-len-1.marker")
        assert log2.append(message("two", id="event-2")) == 1
        assert len(log2) == 2 and second.exists("events/.eventlog-len-2.marker")
    finally:
        first.close()
        second.close()
    with EventStore(database_url) as store:
        assert [e.id for e in store.conversation(cid).events()] == ["event-1", "event-2"]


@pytest.mark.parametrize("index", [0, 1, 99_999, 100_000, 100_001, 999_999, 1_000_000])
def test_event_file_names_agree_with_the_sdks_reader_past_five_digits(index):
    uid = f"{index:08x}-0000-0000-0000-000000000000"
    name = paths.event_path(index, uid)
    found = EVENT_NAME_RE.match(name.rsplit("/", 1)[1])
    assert found is not None and int(found["idx"]) == index and found["event_id"] == uid
    assert paths.classify(name) == paths.EventFile(index, uid)
    assert paths.classify("./" + name) == paths.EventFile(index, uid)
