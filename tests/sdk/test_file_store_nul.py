"""The SDK's own log, written through DatabaseFileStore, keeps an event holding a NUL byte for
byte, and the conversation goes on past the search index's flush with its words found
(searchable.NUL_AS), on SQLite and on PostgreSQL."""

from __future__ import annotations

import uuid

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
