"""ChatHistory (openhands_memory/chat): chat messages and Responses items kept as events.

On both backends: what is appended comes back exactly, by the history that wrote it and by a
fresh one; condensed, what ``messages()`` gives is always a list a provider takes (every
result after its call, every call answered, the appended items in their order); and the
rest of the library works on such a conversation as on any other: search and the recall
tools, pins, replay, branches, the command line and the doctor.
"""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from openhands_memory import ChatHistory
from openhands_memory.chat import tail
from openhands_memory.condensers import ObservationMaskingCondenser
from openhands_memory.conversation import EventStore
from openhands_memory.errors import ConfigError, MalformedChatItem
from openhands_memory.inspection import doctor

from .chat_items import (
    SUMMARIZED_TEXT,
    Item,
    answers,
    calls_of,
    chat_conversation,
    chunks,
    provider_problems,
    responses_conversation,
)
from .cli_runner import invoke

EXAMPLES = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                           HealthCheck.too_slow])


def flat(turns: list[list[Item]]) -> list[Item]:
    return [item for turn in turns for item in turn]


def fresh_id() -> str:
    return f"chat-{uuid.uuid4().hex[:12]}"


# --- exact round trips ---------------------------------------------------------------------


def _round_trip(database_url: str, items: list[Item], batches: list[list[Item]]) -> None:
    cid = fresh_id()
    with ChatHistory(database_url, cid) as h:
        ids = [i for batch in batches for i in h.extend(batch)]
        assert ids == sorted(ids) and len(ids) == len(items)
        assert h.messages() == items
        assert [e.item for e in h.entries()] == items
    with ChatHistory(database_url, cid, create=False) as again:  # nothing cached: read from the rows
        assert again.messages() == items
        assert json.dumps(again.messages()) == json.dumps(items)  # key order too


@EXAMPLES
@given(data=st.data())
def test_chat_messages_come_back_exactly(database_url, data):
    items = flat(data.draw(chat_conversation()))
    _round_trip(database_url, items, chunks(data.draw, items))


@EXAMPLES
@given(data=st.data())
def test_responses_items_come_back_exactly(database_url, data):
    items = flat(data.draw(responses_conversation()))
    _round_trip(database_url, items, chunks(data.draw, items))


def test_objects_with_model_dump_are_stored_as_their_json(tmp_path):
    """A reply object (litellm's ``Message``, the OpenAI client's: pydantic models; the litellm
    loop in test_chat_litellm.py appends litellm's own) is stored as its JSON, unset fields
    left out."""
    from pydantic import BaseModel

    class Function(BaseModel):
        name: str
        arguments: str

    class Call(BaseModel):
        id: str
        type: str = "function"
        function: Function

    class Reply(BaseModel):
        content: str | None = None
        role: str = "assistant"
        tool_calls: list[Call] | None = None
        function_call: dict | None = None

    reply = Reply(tool_calls=[Call(id="c1", function=Function(name="t", arguments="{}"))])
    with ChatHistory(tmp_path / "a.db", "run") as h:
        h.extend([{"role": "user", "content": "go"}, reply, {"role": "tool", "tool_call_id": "c1", "content": "ok"}])
        assert h.messages()[1] == {"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}]}


def test_the_events_are_the_librarys_own(tmp_path):
    """Each item is the event that carries its meaning: the view, stats and the summarizers
    read them as they read an OpenHands conversation."""
    with ChatHistory(tmp_path / "a.db", "run") as h:
        h.extend([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": "looking", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "ls"}'}},
                {"id": "b", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a", "content": "x.py"},
            {"role": "tool", "tool_call_id": "b", "content": "print(1)"},
            {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "run it"}]},
            {"type": "function_call", "call_id": "c", "name": "terminal", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "1"},
        ])
        events = list(h.conversation.events())
    assert [e.kind for e in events] == ["SystemPromptEvent", "MessageEvent", "ActionEvent", "ActionEvent",
                                        "ObservationEvent", "ObservationEvent", "ActionEvent", "ObservationEvent"]
    assert events[0].system_prompt.text == "be brief"
    assert events[2].llm_response_id == events[3].llm_response_id  # one batch
    assert events[2].thought[0].text == "looking" and events[3].thought == []
    assert (events[4].tool_name, events[4].action_id) == ("terminal", events[2].id)
    assert events[6].reasoning_content == "run it"  # the reasoning goes with its call: no cut between
    assert events[7].observation["content"] == [{"type": "text", "text": "1"}]


def test_a_bad_item_is_one_line_and_nothing_is_written(database_url):
    with ChatHistory(database_url, fresh_id()) as h:
        h.append({"role": "user", "content": "hi"})
        for bad, says in [
            ({"role": "tool", "content": "x"}, "item 1: a tool message's tool_call_id must be a string"),
            ({"type": "function_call", "name": "t", "arguments": "{}"}, "item 1: function_call.call_id"),
            ({"role": "assistant", "tool_calls": [{"id": "c", "function": "ls"}]}, "item 1: tool_calls[0].function"),
            ("hello", "item 1: a chat message or Responses item is a JSON object, not str"),
            ({"role": "user", "content": "x", "meta": {1, 2}}, "item 1: not JSON"),
        ]:
            with pytest.raises(MalformedChatItem) as e:
                h.extend([{"role": "user", "content": "fine"}, bad])
            assert str(e.value).startswith(says) and str(e.value).endswith("nothing was written")
            assert "\n" not in str(e.value)
            assert len(h.conversation) == 1
        assert h.messages() == [{"role": "user", "content": "hi"}]


def test_condenser_settings_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="max_tokens goes with a condenser"):
        ChatHistory(tmp_path / "a.db", "x", max_tokens=10)
    with pytest.raises(ConfigError, match="not a condenser type; did you mean 'llm_summarizing'"):
        ChatHistory(tmp_path / "a.db", "x", condenser="llm_sumarizing")
    with pytest.raises(ConfigError, match="max_tokens is given twice"):
        ChatHistory(tmp_path / "a.db", "x", condenser={"type": "llm", "max_tokens": 5}, max_tokens=10)
    h = ChatHistory(tmp_path / "a.db", "x", condenser="llm_summarizing", max_tokens=60_000)
    assert h.condenser.config()["max_tokens"] == 60_000
    h.close()


# --- condensed: always what a provider takes -----------------------------------------------

CONDENSERS = [
    {"type": "llm", "max_size": 8, "keep_first": 1},
    {"type": "recent", "max_events": 7, "keep_first": 1},
    {"type": "amortized", "max_size": 8, "keep_first": 1},
    {"type": "observation_masking", "attention_window": 3},
    {"type": "pipeline", "condensers": [{"type": "observation_masking", "attention_window": 4},
                                        {"type": "llm", "max_size": 10, "keep_first": 2}]},
    {"type": "llm", "max_size": 200, "max_tokens": 60, "keep_first": 1},
]


def _in_order(out: list[Item], appended: list[Item]) -> bool:
    """The items of ``out`` that were appended appear in the order they were appended."""
    given = [json.dumps(item) for item in appended]
    j = 0
    for text in (json.dumps(item) for item in out):
        if text not in given:
            continue
        while j < len(given) and given[j] != text:
            j += 1
        if j == len(given):
            return False
        j += 1
    return True


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(data=st.data())
def test_condensed_messages_are_always_valid(database_url, data):
    responses = data.draw(st.booleans())
    turns = data.draw((responses_conversation if responses else chat_conversation)(min_turns=6, max_turns=20,
                                                                                   text=SUMMARIZED_TEXT))
    settings_ = data.draw(st.sampled_from(CONDENSERS))
    appended: list[Item] = []
    with ChatHistory(database_url, fresh_id(), condenser=settings_) as h:
        for turn in turns:
            h.extend(turn)
            appended += turn
            out = h.messages()
            assert provider_problems(out) == [], (settings_, out)
            assert _in_order(out, appended)
            kept = {json.dumps(i) for i in appended}
            for item in out:
                if json.dumps(item) not in kept:  # a summary, a masked result
                    assert (item.get("role") == "user" and "digest" in item["content"]) or "<MASKED>" in json.dumps(item)
        view = h.conversation.view()
        event(f"condensed: {view.last_condensation is not None or bool(view.replaced)}")
        if view.last_condensation is not None and view.summary_event is not None:
            assert {"content": view.summary_event.summary, "role": "user"} in h.messages(condense=False)


def test_the_window_never_splits_a_call_from_its_result():
    @settings(max_examples=100, deadline=None)
    @given(data=st.data())
    def check(data):
        items = flat(data.draw(st.one_of(chat_conversation(), responses_conversation())))
        limit = data.draw(st.integers(-1, len(items) + 1))
        got = tail(items, limit)
        assert got == items[len(items) - len(got):]  # the newest, in order
        if limit < 0 or limit > len(items):
            assert got == items
        else:
            assert len(got) >= limit
            if limit == 0:
                assert got == []
        made = {c for item in got for c in calls_of(item)}
        assert all(answers(item) in made for item in got if answers(item) is not None)
        if len(got) < len(items):
            assert items[len(items) - len(got) - 1].get("type") != "reasoning"

    check()


def _newest(h: ChatHistory, limit: int, window: int | None = None) -> list[Item] | None:
    """What ``messages(limit=...)`` reads from the branch's end (None: the whole view)."""
    from openhands_memory.chat.newest import newest

    with h.store.reading() as db:
        return newest(db, h.conversation.id, limit, h._render, window)


def _windowed(h: ChatHistory, limit: int) -> str:
    return "whole view" if _newest(h, limit) is None else "window"


@EXAMPLES
@given(data=st.data())
def test_the_newest_items_read_from_the_branchs_end_are_the_views_newest(database_url, data):
    """``messages(limit=N)`` reads a window of the branch's end (chat/newest.py): always the
    newest N items of the whole view (``tail``), whatever the items, the branch and N."""
    responses = data.draw(st.booleans())
    items = flat(data.draw((responses_conversation if responses else chat_conversation)(min_turns=4, max_turns=16)))
    cid = fresh_id()
    with ChatHistory(database_url, cid) as h:
        for batch in chunks(data.draw, items):
            h.extend(batch)
        for _ in range(data.draw(st.integers(0, 3))):  # items taken off, maybe others after them
            h.pop()
        h.extend(data.draw(st.sampled_from([[], [{"role": "user", "content": "on a new branch"}]])))
        whole = h.messages(condense=False)
        for limit in data.draw(st.lists(st.integers(0, len(whole) + 2), min_size=1, max_size=3)):
            assert h.messages(condense=False, limit=limit) == tail(whole, limit)
            window = data.draw(st.integers(1, 12))  # the first window, small: the doubling is what is tried
            got = _newest(h, limit, window)
            event("window" if got is not None else "whole view")
            assert got is None or got == tail(whole, limit)
    with ChatHistory(database_url, cid, create=False) as again:  # nothing cached
        assert again.messages(condense=False, limit=3) == tail(whole, 3)


def test_a_window_reaches_back_to_a_call_answered_long_after(database_url):
    """A result whose call is far back: the window grows until it holds the call (or the
    whole view is read); a condensed branch is read whole. Either way, the view's newest."""
    with ChatHistory(database_url, fresh_id(), condenser={"type": "llm", "max_size": 40, "keep_first": 1}) as h:
        h.append({"role": "user", "content": "go"})
        h.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": "slow", "type": "function", "function": {"name": "build", "arguments": "{}"}}]})
        for i in range(150):
            h.append({"role": "user", "content": f"still waiting {i}"})
        h.append({"role": "tool", "tool_call_id": "slow", "content": "built"})
        h.append({"role": "assistant", "content": "done"})
        whole = h.messages(condense=False)
        for limit in (1, 2, 3, 50):
            assert _windowed(h, limit) == ("window" if limit == 1 else "whole view")
            assert h.messages(condense=False, limit=limit) == tail(whole, limit)
        assert tail(whole, 2)[0]["tool_calls"][0]["id"] == "slow"  # the call, kept with its result
        h.condense(force=True)
        assert _windowed(h, 1) == "whole view"
        assert h.messages(condense=False, limit=5) == tail(h.messages(condense=False), 5)


# --- the rest of the library on a chat history ---------------------------------------------


def _loop(h: ChatHistory, turns: int, start: int = 0) -> None:
    for i in range(start, start + turns):
        h.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "terminal",
                                                             "arguments": json.dumps({"command": f"pytest -k t{i}"})}}]})
        h.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"KeyError frobnicate_{i} in dates.py"})
        h.messages()


def test_pins_search_recall_replay_and_the_command_line(database_url):
    cid = fresh_id()
    with ChatHistory(database_url, cid, condenser={"type": "llm", "max_size": 10, "keep_first": 1}) as h:
        h.append({"role": "system", "content": "You fix tests."})
        task = h.append({"role": "user", "content": "Fix the failing date test"})
        h.pin(task, "keep")
        plan = h.append({"role": "assistant", "content": "Plan: read dates.py, then fix parse()"})
        h.pin(plan, "reinject", label="plan")
        _loop(h, 12)
        out = h.messages()
        assert out[0] == {"role": "system", "content": "You fix tests."}
        assert "digest" in out[1]["content"]  # the summary, then the pins
        assert "Pinned at event 3 (plan)" in out[2]["content"] and "Plan: read dates.py" in out[2]["content"]
        assert {"role": "user", "content": "Fix the failing date test"} in out  # never forgotten
        assert provider_problems(out) == []
        hits = h.search("frobnicate_2")
        assert hits and hits[0].hidden_by is not None
        assert "frobnicate_2" in h.read(hits[0].seq).text
        assert "frobnicate_2" in h.call_recall_tool("recall_search", {"query": "frobnicate_2"})
        replay = h.conversation.replay([("masking", ObservationMaskingCondenser(attention_window=4))])
        assert replay.calls
    for command in (["view", database_url, cid], ["history", database_url, cid], ["stats", database_url, cid]):
        result = invoke(*command)
        assert result.exit_code == 0, result.output
    assert "frobnicate_11" in invoke("view", database_url, cid).output
    with EventStore(database_url) as store:
        assert doctor.check(store, full=True).healthy


def test_pop_moves_back_and_keeps_the_item_on_its_branch(database_url):
    cid = fresh_id()
    with ChatHistory(database_url, cid, condenser={"type": "llm", "max_size": 8, "keep_first": 1}) as h:
        h.append({"role": "user", "content": "go"})
        _loop(h, 6)
        assert h.conversation.view().summary_event is not None
        last = h.append({"role": "assistant", "content": "all green"})
        h.condense(force=True)  # a condensation after the item: carried onto the new branch
        summary = h.conversation.view().summary_event.summary
        before = h.messages(condense=False)
        assert h.pop() == {"role": "assistant", "content": "all green"}
        after = h.messages(condense=False)
        assert after == before[:-1]
        assert h.conversation.view().summary_event.summary == summary
        assert [e.item for e in h.entries()][-1]["role"] == "tool"
        # the item stays stored, on the branch left behind
        assert h.conversation.get(last).llm_message.content[0].text == "all green"
        assert any(b.leaf >= last and not b.head for b in h.branches())
        h.append({"role": "user", "content": "again"})
        assert h.messages(condense=False)[-1] == {"role": "user", "content": "again"}

    with ChatHistory(database_url, fresh_id()) as h:
        assert h.pop() is None
        h.extend([{"type": "reasoning", "id": "rs", "summary": []},
                  {"type": "function_call", "call_id": "f", "name": "t", "arguments": "{}"}])
        assert h.pop() == {"type": "function_call", "call_id": "f", "name": "t", "arguments": "{}"}
        assert [e.item for e in h.entries()] == [{"type": "reasoning", "id": "rs", "summary": []}]
        assert h.pop() == {"type": "reasoning", "id": "rs", "summary": []}
        assert h.pop() is None and h.messages() == []


def test_clear_starts_an_empty_branch_and_keeps_the_old_one_readable(database_url):
    with ChatHistory(database_url, fresh_id()) as h:
        first = h.append({"role": "user", "content": "old task"})
        h.append({"role": "assistant", "content": "old answer"})
        h.clear()
        assert h.messages() == [] and h.entries() == []
        h.append({"role": "user", "content": "new task"})
        assert h.messages() == [{"role": "user", "content": "new task"}]
        old = h.conversation.view(at=first + 1)
        assert [e.llm_message.content[0].text for e in old] == ["old task", "old answer"]
        assert len(h.branches()) == 2


def test_navigate_and_fork(database_url):
    with ChatHistory(database_url, fresh_id(), condenser={"type": "llm", "max_size": 8, "keep_first": 1}) as h:
        h.append({"role": "user", "content": "go"})
        _loop(h, 5)
        entries = h.entries()
        at = entries[4].seq
        fork = h.fork(at=at, conversation_id=fresh_id())
        assert fork.messages() == [e.item for e in entries[:5]]
        assert fork.condenser is h.condenser
        fork.append({"role": "user", "content": "in the fork"})
        assert h.messages()[-1]["role"] == "tool"  # the source is untouched
        h.navigate(at)
        assert h.messages(condense=False) == [e.item for e in entries[:5]]
        h.append({"role": "user", "content": "another way"})
        assert h.messages()[-1] == {"role": "user", "content": "another way"}


def test_a_conversation_written_by_other_means_reads_as_the_view_renders_it(tmp_path):
    from . import factories as f

    store = EventStore(tmp_path / "a.db")
    conv = store.create_conversation("sdk")
    conv.append_many([f.system(), f.user("fix it"), f.action("r1", "c1"), f.observation("c1")])
    h = ChatHistory(store, "sdk")
    h.append({"role": "user", "content": "and now?"})
    out = h.messages()
    assert out[:-1] == store.conversation("sdk").view(at=3).to_messages()
    assert out[-1] == {"role": "user", "content": "and now?"}
    store.close()
