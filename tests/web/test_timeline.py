"""The timeline's pieces: ``Runs`` keeps what was hidden as sorted disjoint runs and hands back
only what is new (hypothesis against a set of ids)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from openhands_memory import ranges
from openhands_memory.web.timeline import Runs


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 30)), max_size=40))
def test_runs_add_returns_exactly_the_new_ids_and_stays_disjoint(spans):
    runs, seen = Runs(), set()
    for start, length in spans:
        end = start + length
        new = runs.add(start, end)
        got = {i for a, b in new for i in range(a, b + 1)}
        assert got == set(range(start, end + 1)) - seen
        assert all(a <= b for a, b in new) and new == sorted(new)
        seen |= set(range(start, end + 1))
        assert list(zip(runs.starts, runs.ends)) == ranges.runs_of(seen)
