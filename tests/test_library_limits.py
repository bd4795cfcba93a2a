"""The library's Python API holds integers to the bounds the command line does (limits.py):
every public Conversation / EventStore / history method given an integer at or past the
storage's limits (-2^63-1, 2^62, 2^63, 2^64, 10^30, ...) returns a result or raises the
library's typed error: an id outside 0..MAX_ID names no event (``EventNotFound``, as a
missing id), a count outside its range is a ``ValueError`` of the library's
(``CountOutOfRange``; ``SearchError`` for a search's limit). Never ``OverflowError`` (SQLite:
"Python int too large to convert to SQLite INTEGER") or the driver's error (PostgreSQL:
"bigint out of range", an ``IntegrityViolation: datatype mismatch``), on either backend.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openhands_memory import limits
from openhands_memory.cli import params
from openhands_memory.condensers import LLMSummarizingCondenser
from openhands_memory.conversation import EventStore
from openhands_memory.conversation.recall import SearchError
from openhands_memory.errors import CountOutOfRange, EventNotFound, OpenHandsMemoryError
from openhands_memory.inspection.history import history

from . import factories as f

EDGES = [-(2**64), -(2**63) - 1, -(2**63), -(2**31), -1, 0, 1, 3, limits.MAX_COUNT, limits.MAX_COUNT + 1,
         2**31, limits.MAX_ID, limits.END, 2**63 - 1, 2**63, 2**64, 10**30]
INTEGERS = st.one_of(st.sampled_from(EDGES), st.integers(-(2**70), 2**70))

# Each public method that takes an integer, with the integer in one place: (name, call, what
# the integer is). "id": an event id; "bound": a bound of an id range (clamped: a result);
# "count": a count whose least value is given.
Call = Callable[[Any, EventStore, int], Any]
CALLS: list[tuple[str, Call, tuple[str, int]]] = [
    ("get", lambda c, s, n: c.get(n), ("id", 0)),
    ("getitem", lambda c, s, n: c[n], ("id", 0)),
    ("view at", lambda c, s, n: c.view(at=n), ("id", 0)),
    ("view head", lambda c, s, n: c.view(head=n), ("id", 0)),
    ("pins at", lambda c, s, n: c.pins(at=n), ("id", 0)),
    ("read", lambda c, s, n: c.read(n), ("id", 0)),
    ("read window", lambda c, s, n: c.read(3, window=n), ("count", 0)),
    ("read max_chars", lambda c, s, n: c.read(3, max_chars=n), ("count", 1)),
    ("search limit", lambda c, s, n: c.search("frobnicate", limit=n, scope="all"), ("count", 1)),
    ("pin", lambda c, s, n: c.pin(n, "reinject"), ("id", 0)),
    ("pin budget", lambda c, s, n: c.pin(3, "reinject", budget=n), ("count", 0)),
    ("unpin", lambda c, s, n: c.unpin(n), ("id", 0)),
    ("navigate", lambda c, s, n: c.navigate(n), ("id", 0)),
    ("fork at", lambda c, s, n: c.fork(at=n), ("id", 0)),
    ("store fork at", lambda c, s, n: s.fork(c.id, n), ("id", 0)),
    ("events start", lambda c, s, n: list(c.events(n)), ("bound", 0)),
    ("events stop", lambda c, s, n: list(c.events(0, n)), ("bound", 0)),
    ("events page", lambda c, s, n: list(c.events(0, None, page=n)), ("count", 1)),
    ("history start", lambda c, s, n: list(history(s, c.id, n)), ("bound", 0)),
    ("history stop", lambda c, s, n: list(history(s, c.id, 0, n)), ("bound", 0)),
]


def fill(store: EventStore) -> Any:
    """A task, tool calls and results, a condensation that hid some, a pin."""
    conv = store.create_conversation("c")
    conv.append_many([f.system(), f.user("Fix the frobnicate parser")])
    for i in range(6):
        conv.append_many([f.action(f"r{i}", f"c{i}", args={"command": f"pytest -k case{i}"}),
                          f.observation(f"c{i}", f"frobnicate failed {i}")])
    conv.step(LLMSummarizingCondenser(max_size=8, keep_first=2))
    conv.pin(1, "keep", label="task")
    return conv


def judged(kind: str, low: int, n: int, outcome: Any) -> None:
    """What a call with ``n`` must have ended in: a result, or the library's typed error, and
    for a value outside the bounds, the error those bounds name."""
    if isinstance(outcome, BaseException):
        assert isinstance(outcome, OpenHandsMemoryError), repr(outcome)
        assert "\n" not in str(outcome), str(outcome)
    if kind == "id" and not 0 <= n <= limits.MAX_ID:
        assert isinstance(outcome, EventNotFound), repr(outcome)
        assert str(n) in str(outcome)
    elif kind == "count" and not low <= n <= limits.MAX_COUNT:
        assert isinstance(outcome, (CountOutOfRange, SearchError)) and isinstance(outcome, ValueError), repr(outcome)
    elif kind == "bound":
        assert not isinstance(outcome, BaseException), repr(outcome)


@pytest.mark.parametrize("name, call, what", CALLS, ids=[c[0] for c in CALLS])
def test_public_methods_take_any_integer_as_a_result_or_a_typed_error(database_url, name, call, what):
    kind, low = what
    with EventStore(database_url) as store:
        conv = fill(store)

        @settings(max_examples=15 if "://" in database_url else 30, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
        @given(n=INTEGERS)
        def run(n: int) -> None:
            before = len(conv), len(store.conversations())
            try:
                outcome: Any = call(conv, store, n)
            except Exception as e:  # judged below: which errors are allowed is the test
                outcome = e
            judged(kind, low, n, outcome)
            if isinstance(outcome, BaseException):
                assert (len(conv), len(store.conversations())) == before, "a refused call wrote"

        run()
        # The store is still usable: a refused value left no transaction open.
        assert conv.get(0).kind == "SystemPromptEvent"


def test_the_bounds_themselves(database_url):
    """The largest id is an id (no such event: EventNotFound), one past it is not one either;
    the largest count is taken, one past it is refused; a range's bounds past the ids hold
    the same events as the ids' own bounds."""
    with EventStore(database_url) as store:
        conv = fill(store)
        for n in (limits.MAX_ID, limits.MAX_ID + 1, -1):
            with pytest.raises(EventNotFound, match=f"has no event {n}$"):
                conv.get(n)
        assert conv.read(3, window=limits.MAX_COUNT).seq == 3
        with pytest.raises(CountOutOfRange, match="window must be at most 1,000,000,000, not 1000000001"):
            conv.read(3, window=limits.MAX_COUNT + 1)
        with pytest.raises(SearchError, match="limit must be at most 1,000,000,000"):
            conv.search("frobnicate", limit=2**61)
        assert conv.search("frobnicate", limit=limits.MAX_COUNT, scope="all")
        everything = [e.seq for e in conv.events()]
        assert [e.seq for e in conv.events(-(2**64), 2**64)] == everything
        assert [r.id for r in history(store, conv.id, -(2**64), 2**64)] == everything
        assert list(conv.events(2**63)) == [] and list(history(store, conv.id, 2**63)) == []


def test_the_numbers_live_in_one_place():
    """The command line checks its arguments against the library's bounds, not copies."""
    assert params.MAX_ID is limits.MAX_ID and params.MAX_COUNT is limits.MAX_COUNT
    assert limits.MAX_ID == limits.END - 1 and limits.END == 2**62
