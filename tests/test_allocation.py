"""Python's cyclic collector is the whole process's: a library call leaves it alone unless the
process's owner allowed the library to pause it (``allocation.allow_collector_pauses``), as
the command line does. Allowed, views and imports pause it while they allocate and always
give it back as they found it."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from openhands_memory import EventStore
from openhands_memory.allocation import allow_collector_pauses, collector_pauses_allowed, collector_paused

from . import factories as f


@pytest.fixture
def restore_gc():
    enabled = gc.isenabled()
    allowed = collector_pauses_allowed()
    yield
    (gc.enable if enabled else gc.disable)()
    allow_collector_pauses(allowed)


@pytest.fixture
def owner(restore_gc):
    """This process's owner allows the pauses (the command line's choice)."""
    allow_collector_pauses()


def collections_during(work) -> int:
    """How many collections ran while ``work()`` ran."""
    runs = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start":
            runs.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        work()
    finally:
        gc.callbacks.remove(seen)
    return len(runs)


def allocate() -> list:
    return [(i, [i]) for i in range(50_000)]  # tracked containers: collections are due


def history(store: EventStore):
    conv = store.create_conversation("c")
    events = [f.system(), f.user("go")]
    for i in range(20):
        events += [f.action(f"r{i}", f"call{i}"), f.observation(f"call{i}")]
    conv.append_many(events)
    return conv


def test_a_library_call_leaves_the_collector_alone(store, restore_gc):
    gc.enable()
    assert not collector_pauses_allowed()  # the default, in any process that did not opt in
    conv = history(store)

    def paused_block() -> None:
        with collector_paused():
            assert gc.isenabled()
            allocate()

    assert collections_during(paused_block) > 0
    assert len(conv.view().to_messages()) > 20 and gc.isenabled() and gc.get_freeze_count() == 0


def test_allowed_the_collector_waits_for_the_block_s_end(owner):
    gc.enable()

    def paused_block() -> None:
        with collector_paused():
            assert not gc.isenabled()
            allocate()

    assert collections_during(paused_block) == 0
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_view_and_its_messages_leave_the_collector_on(store, owner):
    gc.enable()
    conv = history(store)
    assert len(conv.view().to_messages()) > 20
    assert len(conv.view(at=10)) > 0
    assert gc.isenabled()


def test_a_caller_who_turned_the_collector_off_keeps_it_off(store, owner):
    conv = history(store)
    gc.disable()
    conv.view().to_messages()
    assert not gc.isenabled()


def test_the_collector_is_back_on_after_an_error_inside(owner):
    gc.enable()
    with pytest.raises(RuntimeError), collector_paused():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_cycle_made_while_the_collector_is_paused_is_still_collected(owner):
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


def test_the_command_line_allows_the_pauses_for_its_own_process():
    code = ("import sys\n"
            "from openhands_memory import allocation\n"
            "from openhands_memory.cli import main\n"
            "before = allocation.collector_pauses_allowed()\n"
            "try:\n"
            "    main(['--version'])\n"
            "except SystemExit:\n"
            "    pass\n"
            "print(before, allocation.collector_pauses_allowed())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == ["False", "True"]
