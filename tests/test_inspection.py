"""Inspection: which condensation first hid each event, whatever order ranges come in."""

from __future__ import annotations

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
