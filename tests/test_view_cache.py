"""The cached view's fast path (a clean view extended by new events) against fresh queries."""

from openhands_memory import EventStore
from tests import factories as f


def _shape(view):
    return [(e.kind, e.id) for e in view.events], view.unhandled_condensation_request


def _fresh(db_path, conv_id):
    with EventStore(db_path) as other:
        return _shape(other.conversation(conv_id).view())


def test_pairs_appended_to_an_open_thinking_loop_extend_the_view(store, conv, db_path):
    conv.append_many([f.system(), f.user("go"), f.action("r0", "c0", think=True), f.observation("c0")])
    before = conv.view()
    for i in range(1, 6):
        conv.append(f.action(f"r{i}", f"c{i}"))
        conv.append(f.observation(f"c{i}"))
        view = conv.view()
        assert view.extends(before)  # extended, not recomputed
        assert _shape(view) == _fresh(db_path, conv.id)
        assert view.to_messages() == view.to_messages()  # fresh copies, equal content
        before = view
    assert len(before) == 14


def test_a_pending_action_in_an_open_loop_drops_the_loop_as_a_fresh_query_does(store, conv, db_path):
    conv.append_many([f.user("go"), f.action("r0", "c0", think=True), f.observation("c0")])
    conv.view()
    conv.append(f.action("r1", "c1"))  # no result yet: the whole loop is left out
    assert _shape(conv.view()) == _fresh(db_path, conv.id)
    assert [e.kind for e in conv.view()] == ["MessageEvent"]
    conv.append(f.observation("c1"))
    assert _shape(conv.view()) == _fresh(db_path, conv.id)
    assert len(conv.view()) == 5


def test_a_summary_clamped_to_the_end_is_not_extended_past(store, conv, db_path):
    conv.append_many([f.user("a"), f.user("b")])
    conv.append(f.condensation(ranges=[(1, 1)], summary="S", offset=5))  # past the end
    conv.view()
    for text in ("c", "d", "e", "f"):
        conv.append(f.user(text))
        assert _shape(conv.view()) == _fresh(db_path, conv.id)


def test_messages_of_an_extended_view_equal_a_full_build(store, conv):
    conv.append_many([f.system(), f.user("go"), f.action("r0", "c0"), f.observation("c0")])
    conv.view().to_messages()
    conv.append(f.user("more"))
    conv.append(f.user("and more"))  # merges with the previous user message at the seam
    view = conv.view()
    from openhands_memory.view.messages import events_to_messages

    assert view.to_messages() == events_to_messages(view.events)
    mutated = view.to_messages()
    mutated[-1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    assert "cache_control" not in view.to_messages()[-1]["content"][0]


def test_each_step_serializes_into_the_same_messages_as_a_fresh_build_for_every_switch(store, conv):
    """A step reuses the messages of the turns it shares with the rendered view before it;
    the prompt-caching marks still move to the newest user or tool turn, and what a caller
    changes in one call's messages never shows in the next."""
    from openhands_memory.view.messages import Options, events_to_turns, turns_to_messages

    conv.append_many([f.system(), f.user("go")])
    # Each step starts with the switches the step before ended with: those it reuses.
    switches = [dict(), dict(cache_prompt=True), dict(string_content=True, reasoning_content=False), dict()]
    for i in range(7):
        if i == 4:  # the rendered view ends with a user turn, which this one merges into
            conv.append(f.user("and the docs"))
        else:
            conv.append(f.action(f"r{i}", f"c{i}", think=i % 2 == 0))
            conv.append(f.observation(f"c{i}"))
        if i == 3:
            conv.append(f.user("and the tests"))
        view = conv.view()
        for kw in switches:
            expected = turns_to_messages(events_to_turns(view.events), Options(**kw))
            got = view.to_messages(**kw)
            assert got == expected
            for m in got:  # scribble over every container a caller could reach
                m["role"] = "x"
                if isinstance(m.get("content"), list):
                    for part in m["content"]:
                        part["text"] = "changed"
                for call in m.get("tool_calls", []):
                    call["function"]["arguments"] = "{}"
            assert view.to_messages(**kw) == expected
    marked = [i for i, m in enumerate(conv.view().to_messages(cache_prompt=True)) if "cache_control" in m
              or any("cache_control" in p for p in m.get("content", []) if isinstance(p, dict))]
    assert marked == [0, len(conv.view().to_messages()) - 1]  # the system prompt and the newest result
