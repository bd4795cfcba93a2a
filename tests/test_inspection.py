"""Inspection: which condensation first hid each event, whatever order ranges come in."""

from __future__ import annotations

import importlib

from hypothesis import given
from hypothesis import strategies as st

from openhands_memory.inspection.history import first_hiders

ranges_st = st.lists(
    st.tuples(st.integers(0, 12), st.integers(0, 60), st.integers(-1, 12)).map(
        lambda t: (100 + t[0], t[1], t[1] + t[2])
    ),
    max_size=25,
)


@given(ranges_st)
def test_each_id_is_credited_to_the_first_condensation_that_hid_it(forgotten):
    first: dict[int, int] = {}
    for cond, start, end in sorted(forgotten):
        for i in range(start, end + 1):
            first.setdefault(i, cond)
    credited: dict[int, int] = {}
    runs = first_hiders(forgotten)
    assert runs == sorted(runs)
    for start, end, cond in runs:
        for i in range(start, end + 1):
            assert i not in credited, "an id credited twice"
            credited[i] = cond
    assert credited == first


# --- history: what a pin names ---------------------------------------------------------------


def test_a_pin_events_row_names_the_event_it_pins_by_id(database_url, monkeypatch):
    """A pin names its event by external id; the row gives its id, on every page (a page of
    three rows here) and on a branch made after HEAD moved back."""
    from openhands_memory.conversation import EventStore

    from . import factories as f

    # the module, not the function the package exports under the same name
    listing = importlib.import_module("openhands_memory.inspection.history")
    monkeypatch.setattr(listing, "PAGE", 3)
    with EventStore(database_url) as store:
        conv = store.create_conversation("c")
        conv.append_many([f.system(), f.user("task"), f.user("more"), f.user("again")])
        first = conv.pin(1, "keep", label="task")
        conv.navigate(2)
        conv.append(f.user("on a branch"))
        second = conv.pin(2, "reinject")
        undone = conv.unpin(2)
        rows = {r.id: r for r in listing.history(store, "c")}
    assert {i: r.pinned_id for i, r in rows.items() if r.kind == "PinEvent"} == {first: 1, second: 2, undone: 2}
    assert rows[first].as_dict()["pinned_id"] == 1 and "pinned_id" not in rows[0].as_dict()
