"""A long view decodes no event it does not read (view/stored.py), and shows what a short one
shows: the same events when they are read, the same messages, on both backends.

``long_views()`` makes every view a long one (no JSON kept, no serialized copy of its
messages), so that short histories exercise that path.
"""

from __future__ import annotations

import json
import uuid
from contextlib import contextmanager
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openhands_memory import EventStore
from openhands_memory.errors import StoreClosed
from openhands_memory.events import (
    ActionEvent,
    AgentErrorEvent,
    ImageContent,
    Message,
    MessageEvent,
    MessageToolCall,
    ObservationEvent,
    RedactedThinkingBlock,
    TextContent,
    ThinkingBlock,
    UserRejectObservation,
)
from openhands_memory.view import messages, query
from openhands_memory.view.messages import Options, events_to_messages
from openhands_memory.view.stored import Pending, items_of
from tests import factories as f
from tests.test_view_properties import SETTINGS, fresh, histories, oracle, shape

OPTIONS = [Options(), Options(vision=False, reasoning_content=False), Options(cache_prompt=True),
           Options(string_content=True)]


@contextmanager
def long_views():
    with patch.object(query, "KEEP_JSON_UPTO", -1), patch.object(messages, "KEEP_SERIALIZED_UPTO", -1):
        yield


def rich_history() -> list:
    """Every shape a message is made from: thoughts with images, thinking and redacted
    thinking, reasoning, a parallel batch answered by an error and a rejection, terminal
    output with its metadata and an error flag, a browser page with a screenshot, extended
    content, agent messages, a summary and a re-injected pin. Nothing in it is dropped (a
    view that drops events decodes them all: the hypothesis test below covers that)."""
    think = ActionEvent(
        thought=[TextContent(text="look first"), ImageContent(image_urls=["data:image/png;base64,AAAA"])],
        thinking_blocks=[ThinkingBlock(thinking="hmm", signature="s1"), RedactedThinkingBlock(data="xyz")],
        reasoning_content="because",
        action={"kind": "TerminalAction", "command": "ls"},
        tool_name="terminal", tool_call_id="c1",
        tool_call=MessageToolCall(id="c1", name="terminal", arguments='{"command": "ls"}'),
        llm_response_id="r1",
    )
    terminal = ObservationEvent(
        tool_name="terminal", tool_call_id="c1", action_id=think.id,
        observation={"kind": "TerminalObservation", "is_error": True,
                     "content": [{"type": "text", "text": "a\n\"quoted\" é ✓"}, {"type": "text", "text": "b"}],
                     "metadata": {"prefix": "[p]", "suffix": "\n[done]", "working_dir": "/w",
                                  "py_interpreter_path": "/py", "exit_code": 2}},
        extended_content=[TextContent(text="more context")],
    )
    browser = ObservationEvent(
        tool_name="browser", tool_call_id="c4", action_id="a",
        observation={"kind": "BrowserObservation", "content": [{"type": "text", "text": "page"}],
                     "screenshot_data": "iVBORw0KGgoAAAA", "full_output_save_dir": "/tmp/x"},
    )
    return [
        f.system(), f.user("fix the tests"), think, terminal, f.agent_says("looked"),
        f.action("r2", "c2"), f.action("r2", "c3"), f.error("c2"), f.rejection("c3"),
        f.action("r4", "c4", tool="browser", args={"url": "http://x"}), browser,
        f.agent_says("half done"), f.user("go on"),
        f.action("r5", "c5", thought="editing"),
        ObservationEvent(tool_name="file_editor", tool_call_id="c5", action_id="a",
                         observation={"kind": "FileEditorObservation", "content": [{"type": "text", "text": "ok"}]}),
        f.condensation(ranges=[(1, 1)], summary="earlier: asked for a fix", offset=1),
        f.user("last"),
    ]


def _events(view) -> list[str]:
    return [e.to_json() for e in view.events]


def test_a_long_view_shows_what_a_short_one_shows(database_url):
    with EventStore(database_url) as store:
        conv = store.create_conversation("rich")
        conv.append_many(rich_history())
        conv.pin(1, "reinject")  # forgotten by the condensation: shown again after the summary
        short = conv.view()
        with EventStore(database_url) as other, long_views():
            long = other.conversation("rich").view()
            items = [x for x in items_of(long.events) if type(x) is Pending]
            assert items and all(x.payload is None for x in items)  # no JSON kept
            pending = [x for x in items if x.kind in ("ActionEvent", "ObservationEvent")]
            assert len(pending) == 8 and all(x.event is None for x in pending)  # nor decoded
            for options in OPTIONS:
                sent = long.to_messages(**options.__dict__)
                assert sent == short.to_messages(**options.__dict__)
                assert sent == long.to_messages(**options.__dict__)  # a fresh list each call
            assert all(x.event is None for x in pending)  # rendered, never decoded
            assert long.seqs == short.seqs and len(long) == len(short) == 17
            assert _events(long) == _events(short)  # read now, from the store
            for options in OPTIONS:
                assert long.to_messages(**options.__dict__) == events_to_messages(list(long.events), options)


def test_a_long_view_reads_an_event_when_first_read_and_keeps_it(store, conv):
    conv.append_many([f.system(), f.user("go"), f.action("r0", "c0"), f.observation("c0")])
    with long_views():
        view = conv.view(at=3)  # (not cached: a new view)
    first = view[2]
    assert isinstance(first, ActionEvent) and first.tool_call_id == "c0" and first.seq == 2
    assert view[2] is first and view.events[-2] is first
    assert [e.kind for e in view] == ["SystemPromptEvent", "MessageEvent", "ActionEvent", "ObservationEvent"]
    # a list's operations, as a view's events were a list
    assert view.events[1:3] == [view[1], first] and view.events == list(view)
    assert [] + view.events == view.events + [] == list(view)


def test_a_long_view_read_after_its_store_closed_says_so(db_path):
    store = EventStore(db_path)
    conv = store.create_conversation("c")
    conv.append_many([f.user("go"), f.action("r0", "c0"), f.observation("c0")])
    with long_views():
        view = conv.view(at=2)
    sent = view.to_messages()
    store.close()
    assert view.to_messages() == sent  # its messages need nothing from the store
    with pytest.raises(StoreClosed, match="the store is closed, and this long view of conversation 'c'"):
        list(view.events)


def test_a_long_view_extended_by_steps_equals_a_fresh_one(db_path):
    with EventStore(db_path) as store, long_views():
        conv = store.create_conversation("c")
        conv.append_many([f.system(), f.user("go"), f.action("r0", "c0", think=True), f.observation("c0")])
        before = conv.view()
        before.to_messages()
        for i in range(1, 4):
            conv.append(f.action(f"r{i}", f"c{i}"))
            conv.append(f.observation(f"c{i}"))
            view = conv.view()
            assert view.extends(before)
            mutated = view.to_messages()
            mutated[-1]["content"][0]["text"] = "changed by the caller"
            with EventStore(db_path) as other:
                fresh_view = other.conversation("c").view()
                assert view.to_messages() == fresh_view.to_messages()
                assert _events(view) == _events(fresh_view)
            before = view


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("long") / "long.db"
    with EventStore(path) as a, EventStore(path) as b:
        yield a, b


@settings(max_examples=120, **SETTINGS)
@given(history=histories(), data=st.data())
def test_long_and_short_views_agree_on_any_history(shared_store, history, data):
    store, other = shared_store
    conv = store.create_conversation(str(uuid.uuid4()))
    conv.append_many(fresh(history))
    at = data.draw(st.one_of(st.none(), st.integers(0, max(len(history) - 1, 0))), label="at")
    at = at if history else None
    short = other.conversation(conv.id).view(at=at)
    with long_views():
        long = conv.view(at=at)
    expected = oracle(history if at is None else history[: at + 1])[:2]
    assert shape(long) == shape(short) == expected
    assert [d.property for d in long.dropped] == [d.property for d in short.dropped]
    for options in (OPTIONS[0], OPTIONS[2]):
        sent = long.to_messages(**options.__dict__)
        assert sent == short.to_messages(**options.__dict__)
        # the records' rendering is the events' (pydantic models, decoded from the store)
        assert sent == events_to_messages(list(long.events), options)
    assert _events(long) == _events(short)


def test_records_keep_every_field_a_message_reads():
    """The typed records skip what they do not name: what they name must be what the
    renderers read of an event (a field the renderers start to read must be added here)."""
    from openhands_memory.view import records

    action = rich_history()[2]
    record = records.DECODERS["ActionEvent"].decode(action.to_json())
    for options in OPTIONS:
        assert (messages.serialize(messages.batch_turn([record]), options)
                == messages.serialize(messages.batch_turn([action]), options))
    obs = rich_history()[3]
    record = records.DECODERS["ObservationEvent"].decode(obs.to_json())
    assert messages.result_turn(record) == messages.result_turn(obs)
    assert json.loads(obs.to_json())["observation"] == record.observation


def test_results_read_as_records_show_what_their_events_show():
    for event in (AgentErrorEvent(tool_name="terminal", tool_call_id="c1", error="no such tool"),
                  UserRejectObservation(tool_name="terminal", tool_call_id="c2", action_id="a",
                                        rejection_reason="not that one")):
        shown, decoded, call_id = messages.renderable(event.kind, event.to_json(), 0)
        assert decoded is None and call_id == event.tool_call_id
        assert shown == messages.result_turn(event)


_TEXT = st.text(max_size=12)
_PART = st.one_of(
    st.builds(TextContent, text=_TEXT, cache_prompt=st.booleans()),
    st.builds(ImageContent, image_urls=st.lists(st.just("data:image/png;base64,AA"), min_size=1, max_size=2),
              cache_prompt=st.booleans()),
)
_MESSAGES = st.builds(
    MessageEvent,
    source=st.sampled_from(["user", "agent"]),
    llm_message=st.builds(
        Message,
        role=st.sampled_from(["user", "system", "assistant", "tool"]),
        content=st.lists(_PART, max_size=3),
        tool_calls=st.one_of(st.none(), st.lists(st.builds(MessageToolCall, id=_TEXT, name=_TEXT, arguments=_TEXT),
                                                 max_size=2)),
        tool_call_id=st.one_of(st.none(), _TEXT),
        name=st.one_of(st.none(), _TEXT),
        reasoning_content=st.one_of(st.none(), _TEXT),
        thinking_blocks=st.lists(st.one_of(st.builds(ThinkingBlock, thinking=_TEXT, signature=st.one_of(st.none(), _TEXT)),
                                           st.builds(RedactedThinkingBlock, data=_TEXT)), max_size=2),
    ),
    extended_content=st.lists(st.builds(TextContent, text=_TEXT), max_size=2),
)


@given(event=_MESSAGES)
def test_a_message_read_as_a_record_is_sent_as_its_event_is(event):
    """A chat history is mostly messages: a long view reads them as typed records, never as
    pydantic events, and each is sent byte for byte as its event would be, with every switch."""
    shown, decoded, _ = messages.renderable("MessageEvent", event.to_json(), 0)
    assert decoded is None and type(shown).__name__ == "MessageRecord"
    for options in OPTIONS:
        assert (messages.serialize(messages.single_turn(shown), options)
                == messages.serialize(messages.single_turn(event), options))


_TEXT_OR_NOT = st.one_of(st.none(), st.text(max_size=8), st.integers(-2, 2), st.booleans())
_CONTENT_ITEM = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=20)},
                          optional={"cache_prompt": st.booleans()}),
    st.fixed_dictionaries({"text": st.text(max_size=20)}),  # no type: a text, as the SDK reads it
    st.fixed_dictionaries({"type": st.just("image"), "image_urls": st.just(["data:image/png;base64,AA"])}),
)
_METADATA = st.fixed_dictionaries({}, optional={
    "prefix": st.one_of(st.none(), st.text(max_size=8)),
    "suffix": st.one_of(st.none(), st.text(max_size=8)),
    "working_dir": _TEXT_OR_NOT,
    "py_interpreter_path": _TEXT_OR_NOT,
    "exit_code": st.one_of(st.none(), st.integers(-2, 2)),
    "pid": st.integers(-1, 9),
})


@settings(max_examples=150, deadline=None)
@given(content=st.lists(_CONTENT_ITEM, max_size=3), metadata=st.one_of(st.none(), _METADATA),
       extra=st.fixed_dictionaries({}, optional={
           "is_error": st.booleans(), "full_output_save_dir": st.one_of(st.none(), st.text(max_size=5)),
           "command": st.text(max_size=5)}),
       long_output=st.booleans())
def test_a_terminal_result_read_as_a_record_shows_what_its_event_shows(content, metadata, extra, long_output):
    """A terminal observation is read as a typed record when its JSON has that shape (else
    as a dict): either way its tool turn is the one its decoded event gives."""
    from openhands_memory.view import records

    if long_output:
        content = content + [{"type": "text", "text": "line\n" * 8_000}]  # cut at 30,000
    observation = {"kind": "TerminalObservation", "content": content, **extra}
    if metadata is not None:
        observation["metadata"] = metadata
    event = ObservationEvent(tool_name="terminal", tool_call_id="c1", observation=observation, action_id="a")
    payload = event.to_json()
    shown, decoded, call_id = messages.renderable("ObservationEvent", payload, 0)
    assert decoded is None and call_id == "c1"
    assert shown == messages.result_turn(event)
    plain = all(isinstance(c, dict) and c.get("type", "text") == "text" for c in content)
    if plain and all(isinstance(metadata.get(k), (str, type(None))) for k in ("prefix", "suffix")) if metadata else plain:
        # the shape the record reads: the fast path was the one taken
        assert payload.rfind(records.TERMINAL_KIND) >= 0
        assert type(records.TERMINAL.decode(payload).observation) is records.TerminalRecord


def test_sqlite_reads_a_long_view_past_its_page_cache_and_restores_it(store, conv):
    """A long view's rows are read once: SQLite's cache is shrunk for the read (they would
    fill it, and the process) and given back its size after."""
    from openhands_memory import database
    from openhands_memory.storage import sqlite

    conv.append_many([f.user("go"), f.action("r0", "c0"), f.observation("c0")])
    sizes = []
    store.db.set_trace_callback(lambda sql: sizes.append(sql) if "cache_size" in sql else None)
    with long_views():
        conv.view(at=2)
    conv.view(at=1)  # a short one: its cache is left alone
    store.db.set_trace_callback(None)
    assert sizes == [f"PRAGMA cache_size=-{sqlite.ONCE_CACHE_KIB}", f"PRAGMA cache_size=-{database.CACHE_KIB}"]
    assert store.db.execute("PRAGMA cache_size").fetchone()[0] == -database.CACHE_KIB


def test_a_chat_historys_long_view_keeps_the_json_and_renders_no_row(database_url):
    """ChatHistory renders items from its events' JSON: its long view hands that JSON over
    instead of rendering every row for messages nobody asked for (and lets it go once the
    items are made), and the items are the ones appended; asked for messages, the same view
    still renders them, reading the rows again."""
    from openhands_memory.chat import ChatHistory

    items = [{"role": "user", "content": "fix the tests"}]
    for k in range(6):
        items += [{"role": "assistant", "content": None, "tool_calls": [
                      {"id": f"c{k}", "type": "function", "function": {"name": "terminal", "arguments": f"{{\"n\": {k}}}"}}]},
                  {"role": "tool", "tool_call_id": f"c{k}", "content": f"ran {k}"}]
    with ChatHistory(database_url, "chat") as history:
        history.extend(items)
    with long_views(), ChatHistory(database_url, "chat") as history:
        assert history.messages() == items
        view = history.view()
        pending = [x for x in items_of(view.events) if type(x) is Pending]
        assert pending and all(x.shown is None and x.payload is None for x in pending)
        with EventStore(database_url) as other:
            assert view.to_messages() == other.conversation(history.conversation.id).view().to_messages()
