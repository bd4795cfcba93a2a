"""Views and imports pause Python's cyclic collector while they allocate, and always give it
back as they found it: a library must not leave a caller's process without collection."""

from __future__ import annotations

import gc

import pytest

from openhands_memory import EventStore
from openhands_memory.allocation import collector_paused

from . import factories as f


@pytest.fixture
def restore_gc():
    enabled = gc.isenabled()
    yield
    (gc.enable if enabled else gc.disable)()


def history(store: EventStore):
    conv = store.create_conversation("c")
    events = [f.system(), f.user("go")]
    for i in range(20):
        events += [f.action(f"r{i}", f"call{i}"), f.observation(f"call{i}")]
    conv.append_many(events)
    return conv


def test_a_view_and_its_messages_leave_the_collector_on(store, restore_gc):
    gc.enable()
    conv = history(store)
    assert len(conv.view().to_messages()) > 20
    assert len(conv.view(at=10)) > 0
    assert gc.isenabled()


def test_a_caller_who_turned_the_collector_off_keeps_it_off(store, restore_gc):
    conv = history(store)
    gc.disable()
    conv.view().to_messages()
    assert not gc.isenabled()


def test_the_collector_is_back_on_after_an_error_inside(restore_gc):
    gc.enable()
    with pytest.raises(RuntimeError), collector_paused():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_cycle_made_while_the_collector_is_paused_is_still_collected(restore_gc):
    """The objects a paused block leaves are moved to the oldest generation, not frozen:
    garbage among them is collected by the next full collection."""
    import weakref

    class Node:
        pass

    gc.enable()
    with collector_paused():
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle: only the collector can free it
        gone = weakref.ref(a)
    del a, b
    assert gone() is not None
    gc.collect()
    assert gone() is None
    assert gc.get_freeze_count() == 0
