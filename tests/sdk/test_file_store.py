"""DatabaseFileStore keeps the SDK's FileStore contract, on SQLite and on PostgreSQL: the
files the SDK writes read back, the event log is rows and append-only, the lock is one
transaction, and two processes appending to one conversation leave a gap-free log."""

from __future__ import annotations

import multiprocessing
import uuid

import pytest
from openhands.sdk.conversation.event_store import EventLog
from openhands.sdk.event import MessageEvent
from openhands.sdk.llm import Message, TextContent

from openhands_memory.integrations.openhands_sdk import DatabaseFileStore
from openhands_memory.conversation import EventStore


def message(text: str) -> MessageEvent:
    return MessageEvent(source="user", llm_message=Message(role="user", content=[TextContent(text=text)]))


@pytest.fixture
def fs(database_url):
    store = DatabaseFileStore(database_url, uuid.uuid4())
    yield store
    store.close()


def test_base_state_and_other_files_read_back(fs):
    assert not fs.exists("base_state.json")
    with pytest.raises(FileNotFoundError):
        fs.read("base_state.json")
    fs.write("base_state.json", '{"id": "x"}')
    fs.write("base_state.json", '{"id": "y"}')
    assert fs.read("base_state.json") == '{"id": "y"}'
    fs.write("notes/plan.md", "step one")
    fs.write("notes/deep/data.bin", b"\x00\x01")
    fs.write("./notes//todo.md", "x")
    assert fs.read("notes/todo.md") == "x"
    assert fs.exists("notes") and fs.exists("notes/plan.md") and not fs.exists("notes/nope.md")
    assert sorted(fs.list("notes")) == ["notes/deep/", "notes/plan.md", "notes/todo.md"]
    assert fs.list("notes/plan.md") == ["notes/plan.md"]
    assert set(fs.list("")) >= {"base_state.json", "notes/"}
    fs.delete("notes/deep")
    assert not fs.exists("notes/deep/data.bin")
    fs.delete("base_state.json")
    assert not fs.exists("base_state.json")
    with pytest.raises(ValueError, match="escapes"):
        fs.write("../other/base_state.json", "{}")
    assert fs.get_absolute_path("notes/plan.md").endswith(f"#{fs.conversation_id}/notes/plan.md")


def test_the_event_log_is_rows_the_sdk_reads_back(fs, database_url):
    fs.write("base_state.json", "{}")
    log = EventLog(fs)
    events = [message(f"m{i}") for i in range(600)]  # more than two read-ahead blocks
    for e in events:
        log.append(e)
    with EventStore(database_url) as store:
        stored = list(store.conversation(fs.conversation_id).events())
    assert [e.id for e in stored] == [e.id for e in events]
    # A new log (an SDK resume) finds every event, forward and backward.
    again = EventLog(DatabaseFileStore(database_url, fs.conversation_id))
    assert len(again) == 600
    assert [e.id for e in reversed(list(again))] == [e.id for e in reversed(events)]
    assert again[599].id == events[599].id and again[0].id == events[0].id
    assert fs.exists("events/.eventlog-len-600.marker") and not fs.exists("events/.eventlog-len-599.marker")
    name = f"events/event-00003-{events[3].id}.json"
    assert fs.exists(name) and fs.read(name) == events[3].model_dump_json(exclude_none=True)
    assert not fs.exists(f"events/event-00003-{events[4].id}.json")


def test_the_log_is_append_only(fs):
    fs.write("base_state.json", "{}")
    first, second = message("a"), message("b")
    fs.write(f"events/event-00000-{first.id}.json", first.model_dump_json())
    with pytest.raises(FileExistsError, match="append-only"):
        fs.write(f"events/event-00000-{second.id}.json", second.model_dump_json())
    with pytest.raises(ValueError, match="gap"):
        fs.write(f"events/event-00002-{second.id}.json", second.model_dump_json())
    with pytest.raises(ValueError, match="id is"):
        fs.write(f"events/event-00001-{first.id}.json", second.model_dump_json())
    with pytest.raises(PermissionError, match="append-only"):
        fs.delete(f"events/event-00000-{first.id}.json")
    assert fs.list("events") == [f"events/event-00000-{first.id}.json"]


def test_an_event_larger_than_an_import_reads_is_refused_by_the_sdks_log(fs):
    """The SDK's log used to store a 73 MB observation that `import` of its export refused
    (64 MB an event): the store keeps the one limit every write keeps, and the log goes on."""
    from openhands_memory.errors import EventTooLarge
    from openhands_memory.storage.codec import MAX_EVENT_BYTES

    fs.write("base_state.json", "{}")
    log = EventLog(fs)
    log.append(message("before"))
    short = message("x")
    big = message("x" * (MAX_EVENT_BYTES + 2 - len(short.model_dump_json(exclude_none=True))))
    with pytest.raises(EventTooLarge, match=rf"event {big.id} \(MessageEvent\) is 67,108,865 bytes of JSON"):
        log.append(big)
    del big
    log.append(message("after"))
    assert [e.llm_message.content[0].text for e in EventLog(fs)] == ["before", "after"]


def test_what_is_written_under_the_lock_commits_together_or_not_at_all(fs, database_url):
    fs.write("base_state.json", "{}")
    a, b = message("a"), message("b")
    with pytest.raises(RuntimeError), fs.lock("events/.eventlog.lock"):
        fs.write(f"events/event-00000-{a.id}.json", a.model_dump_json())
        assert fs.exists(f"events/event-00000-{a.id}.json")  # seen inside the block
        raise RuntimeError("the process fails mid-append")
    assert fs.list("events") == []
    with fs.lock("events/.eventlog.lock"):
        fs.write(f"events/event-00000-{a.id}.json", a.model_dump_json())
        fs.write(f"events/event-00001-{b.id}.json", b.model_dump_json())
    with EventStore(database_url) as store:
        assert len(store.conversation(fs.conversation_id)) == 2
    assert fs.conversation.view().events[-1].id == b.id  # the writer's cached view has them


def _append(database: str, cid: str, n: int, tag: str) -> None:
    log = EventLog(DatabaseFileStore(database, cid))
    for i in range(n):
        log.append(message(f"{tag}{i}"))


def test_two_processes_appending_to_one_conversation_leave_a_gap_free_log(database_url):
    cid = str(uuid.uuid4())
    DatabaseFileStore(database_url, cid).write("base_state.json", "{}")
    fork = multiprocessing.get_context("fork")
    workers = [fork.Process(target=_append, args=(database_url, cid, 150, tag)) for tag in "ab"]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert [w.exitcode for w in workers] == [0, 0]
    with EventStore(database_url) as store, store.reading() as db:
        rows = db.event_page(cid, 0, 2**62, 2**62, columns="id, uid")
    assert [i for i, _ in rows] == list(range(300))
    assert len({u for _, u in rows}) == 300
    assert len(EventLog(DatabaseFileStore(database_url, cid))) == 300


def test_deleting_the_conversation_folder_deletes_the_conversation(fs, database_url):
    fs.write("base_state.json", "{}")
    fs.write("notes/a.md", "x")
    fs.delete("")
    assert not fs.exists("") and not fs.exists("base_state.json")
    with EventStore(database_url) as store:
        assert fs.conversation_id not in store


def test_a_refused_first_write_leaves_nothing_and_the_next_one_works(fs, database_url):
    e = message("a")
    with pytest.raises(ValueError, match="gap"):
        fs.write(f"events/event-00001-{e.id}.json", e.model_dump_json())
    with EventStore(database_url) as store:
        assert fs.conversation_id not in store  # the conversation it began to create is gone
    fs.write("base_state.json", "{}")
    fs.write(f"events/event-00000-{e.id}.json", e.model_dump_json())
    assert fs.list("events") == [f"events/event-00000-{e.id}.json"]
