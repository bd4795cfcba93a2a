"""The SDK's own log, written through DatabaseFileStore, keeps an event holding a NUL byte for
byte, and the conversation goes on past the search index's flush with its words found
(searchable.NUL_AS), on SQLite and on PostgreSQL."""

from __future__ import annotations

import uuid

import pytest

from openhands.sdk.conversation.event_store import EventLog
from openhands.sdk.event import MessageEvent
from openhands.sdk.llm import Message, TextContent

from openhands_memory.conversation import EventStore
from openhands_memory.integrations.openhands_sdk import DatabaseFileStore
from openhands_memory.storage import search

from .. import factories as f


def message(text: str) -> MessageEvent:
    return MessageEvent(source="user", llm_message=Message(role="user", content=[TextContent(text=text)]))


def test_the_sdks_log_keeps_a_nul_and_the_conversation_flushes_past_it(database_url):
    fs = DatabaseFileStore(database_url, uuid.uuid4())
    try:
        fs.write("base_state.json", "{}")
        log = EventLog(fs)
        nul = message("binary output x\0nul tokNULq")
        log.append(message("before"))
        log.append(nul)
        name = f"events/event-00001-{nul.id}.json"
        assert fs.read(name) == nul.model_dump_json(exclude_none=True)
        with EventStore(database_url) as store:
            conv = store.conversation(fs.conversation_id)
            assert [h.seq for h in conv.search("tokNULq", scope="all")] == [1]
            flush_at = search.FLUSH_AT if store.recorder.backend == "sqlite" else search.PG_FLUSH_AT
            conv.append_many([f.user(f"step {i}") for i in range(flush_at)])
            assert [h.seq for h in conv.search("x\0nul tokNULq", scope="all")] == [1]
        log.append(message("after the flush"))  # the SDK's next append is not stopped
        assert EventLog(DatabaseFileStore(database_url, fs.conversation_id))[1].llm_message.content[0].text \
            == "binary output x\0nul tokNULq"
    finally:
        fs.close()


def test_the_sdks_log_refuses_an_event_whose_identifier_holds_a_nul(database_url):
    """A tool call id with a NUL (storage/codec.py's IDENTIFIERS): the SDK's append is refused
    with the library's one-line error and nothing is written, on both backends (PostgreSQL
    used to store the id cut at the NUL); the log's next append takes the same place."""
    from openhands.sdk.event import ActionEvent
    from openhands.sdk.llm import MessageToolCall
    from openhands.sdk.tool.builtins.think import ThinkAction

    from openhands_memory.errors import UnstorableIdentifier

    fs = DatabaseFileStore(database_url, uuid.uuid4())
    try:
        log = EventLog(fs)
        first = message("before")
        log.append(first)
        action = ThinkAction(thought="plan")
        bad = ActionEvent(thought=[], action=action, tool_name="think", tool_call_id="call\0x",
                          tool_call=MessageToolCall(id="call\0x", name="think", arguments=action.model_dump_json(),
                                                    origin="completion"),
                          llm_response_id="resp-1")
        with pytest.raises(UnstorableIdentifier) as refused:
            log.append(bad)
        assert "tool_call_id 'call\\x00x'" in str(refused.value) and "\n" not in str(refused.value)
        fresh = EventLog(DatabaseFileStore(database_url, fs.conversation_id))
        assert len(fresh) == 1 and fs.list("events") == [f"events/event-00000-{first.id}.json"]
        log = EventLog(DatabaseFileStore(database_url, fs.conversation_id))
        log.append(message("after"))
        assert [e.llm_message.content[0].text for e in EventLog(DatabaseFileStore(database_url, fs.conversation_id))] \
            == ["before", "after"]
    finally:
        fs.close()
