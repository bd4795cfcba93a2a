"""What a backend provides: the storage contract, written down.

A recorder (``recorder.Recorder``, an ABC) owns a connection and hands out sessions. A
session is one transaction's statements: ``Session`` (``session.py`` with its inspection
mixin) writes them once, with ``?`` placeholders, and a backend's subclass overrides what its
dialect spells differently. What every session must provide, whatever the backend, is
``BackendSession``: the driver hooks a backend implements (``Driver``) and the statements the
layers above call (``Statements``). Nothing above ``storage/`` calls a session method that
is not listed here (``tests/test_storage_contract.py`` checks that, that both backends'
sessions provide all of it with these signatures, and runs the statements on both).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence, runtime_checkable

from ..ranges import Run
from .search import SearchFilters
from .session import END


class Driver(Protocol):
    """What a backend implements or overrides in its ``Session`` subclass."""

    def sql(self, text: str) -> str:
        """``text`` in the driver's placeholder style."""
        ...

    def execute(self, text: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement; driver errors leave as the library's (``translate``)."""
        ...

    def executemany(self, text: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement for many rows (PostgreSQL may COPY instead)."""
        ...

    def run_all(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> list[list[tuple]]:
        """The rows of each statement, in order; a backend may send them together."""
        ...

    def run_streaming(
        self, streamed: Sequence[tuple[str, Sequence[Any]]], statements: Sequence[tuple[str, Sequence[Any]]],
        *, once: bool = False,
    ) -> tuple[Iterator[tuple], list[list[tuple]]]:
        """``run_all(statements)``, and the rows of ``streamed``, taken by the caller inside
        the transaction (a backend that can reads them a batch at a time). ``once``: many
        rows read once, which the backend need not cache."""
        ...

    def translate(self, error: Exception) -> None:
        """Raise the library's error for a driver error, or return to let it pass."""
        ...

    def no_index(self, column: str) -> str:
        """``column`` written so that the planner will not pick an index for it."""
        ...

    def touch(self, cid: str) -> Any:
        """Mark this transaction's write to ``cid`` for other connections' view caches, and
        return the version it leaves (``Recorder.version``), read inside the transaction."""
        ...

    def file_problems(self, full: bool) -> list[str]:
        """What the database engine itself finds wrong (an empty list: nothing)."""
        ...


class Statements(Protocol):
    """Every statement the library runs above ``storage/``, and the storage modules'
    own (``hidden.py``, ``condensations.py``), grouped as ``session.py`` groups them."""

    # --- conversations ----------------------------------------------------------------

    def insert_conversation(self, cid: str, created_at: str, metadata: dict[str, Any]) -> None:
        ...

    def conversation_exists(self, cid: str) -> bool:
        ...

    def conversations(self) -> list[tuple[str, str, dict[str, Any]]]:
        ...

    def conversation_ids_like(self, prefix: str, limit: int) -> list[str]:
        ...

    def delete_conversation(self, cid: str) -> bool:
        ...

    def metadata(self, cid: str) -> dict[str, Any] | None:
        ...

    def set_metadata(self, cid: str, metadata: dict[str, Any]) -> None:
        ...

    # --- events -----------------------------------------------------------------------

    def last_seq(self, cid: str, upto: int = END) -> int:
        """The conversation's newest sequence number at or before ``upto`` (-1: none)."""
        ...

    def insert_events(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Rows made by ``codec.event_row``."""
        ...

    def defer_event_indexes(self) -> list[str]:
        """Before a bulk load into an empty ``event`` table: drop the indexes it would fill
        key by key; the statements that build them again ([] when none was dropped)."""
        ...

    def build_indexes(self, statements: Sequence[str]) -> None:
        """Run what ``defer_event_indexes`` returned, once the load's rows are in."""
        ...

    def event(self, cid: str, seq: int) -> tuple[str, str] | None:
        ...

    def event_page(
        self, cid: str, start: int, stop: int, limit: int, kinds: Sequence[str] | None = None,
        columns: str = "id, kind, payload",
    ) -> list[tuple]:
        """Rows with ids in ``[start, stop)``, oldest first, at most ``limit``."""
        ...

    def seqs_of(self, cid: str, before: int, uids: Sequence[str]) -> list[tuple[int, str]]:
        """(seq, uid) of the events before ``before`` with these external ids."""
        ...

    # --- condensations ----------------------------------------------------------------

    def insert_condensation(self, cid: str, seq: int, values: Sequence[Any], runs: Sequence[Run]) -> None:
        """The condensation row (``values``: summary, offset, strategy, reason, config JSON,
        tokens before, tokens after) and its forgotten ranges."""
        ...

    def latest_condensation(self, cid: str, upto: int = END) -> int | None:
        ...

    def forgotten_ranges(self, cid: str) -> list[tuple[int, int, int]]:
        """(condensation, start, end) of every forgotten range, by condensation then start."""
        ...

    def condensations_with_ranges(self, cid: str) -> list[tuple[int, int | None, int | None]]:
        """(condensation, start, end) rows, a condensation without ranges once with NULLs."""
        ...

    # --- hidden runs (see hidden.py) --------------------------------------------------

    def hidden_live(self, cid: str) -> list[Run]:
        ...

    def hidden_at(self, cid: str, condensation_id: int) -> list[Run]:
        ...

    def any_visible(self, cid: str, lo: int, hi: int) -> bool:
        ...

    def close_hidden(self, cid: str, until: int, starts: Iterable[int]) -> None:
        ...

    def open_hidden(self, cid: str, since: int, runs: Iterable[Run]) -> None:
        ...

    def hidden_rows(self, cid: str) -> list[tuple[int, int, int, int | None]]:
        """(from, start, end, until) of every hidden run row, sorted."""
        ...

    def replace_hidden(self, cid: str, rows: Iterable[tuple[int, int, int, int | None]]) -> None:
        ...

    # --- the view (see view/query.py) -------------------------------------------------

    def view_ends(self, cid: str, upto: int) -> tuple[int, int | None, int | None]:
        """(the last event id <= upto, the newest condensation <= upto, the newest overall)."""
        ...

    def view_head(
        self, cid: str, at: int | None
    ) -> tuple[int, int | None, int | None, list[Run] | None, list[Run], list[tuple[int, str]]]:
        """``view_ends`` up to ``at``, the live hidden runs when they are the ones in force
        there (else None), the path from the view's leaf to the root, and the pin events up
        to ``at``."""
        ...

    def pin_events(self, cid: str, upto: int = END) -> list[tuple[int, str]]:
        """(id, payload) of the pin events with ids up to ``upto``, oldest first."""
        ...

    def llm_reply(self, key: str) -> str | None:
        """The model reply kept under ``key`` (its JSON), or None."""
        ...

    def keep_llm_reply(self, key: str, model: str, reply: str, created_at: str) -> None:
        """Keep a model reply under ``key`` (a second one changes nothing)."""
        ...

    def search_index_on(self) -> bool:
        """Whether the database keeps the full-text index."""
        ...

    def set_search_index(self, on: bool, progress: Callable[[int, int], None] | None = None) -> bool:
        """Build or drop the full-text index; whether that changed anything."""
        ...

    def search_words(self, cid: str, terms: Sequence[str], upto: int, limit: int,
                     filters: SearchFilters) -> list[tuple[int, float]]:
        """(id, score) of the newest events up to ``upto`` whose text has every term."""
        ...

    def search_grams(self, cid: str, fragment: str, upto: int, limit: int,
                     filters: SearchFilters) -> list[int]:
        """Ids of the newest events up to ``upto`` whose text holds ``fragment``."""
        ...

    def event_rows(self, cid: str, seqs: Sequence[int]) -> list[tuple[int, str, str, str | None, str, str]]:
        """(id, uid, kind, tool_name, timestamp, payload) of the events with these ids."""
        ...

    def hidden_by(self, cid: str, seq: int) -> int | None:
        """The condensation whose live hidden run holds ``seq``."""
        ...

    def results_near(self, cid: str, seq: int, call_id: str, span: int = 256) -> list[int]:
        """Ids near ``seq`` holding tool call ``call_id``."""
        ...


    def view_tail(
        self, cid: str, intervals: Sequence[Run], upto: int, *, count: bool = True, once: bool = False
    ) -> tuple[Iterator[tuple], list[tuple], tuple | None, int | None, dict[str, int]]:
        """What a view reads once its intervals are known, in one ``run_streaming``: the rows
        (``VIEW_ROW_COLUMNS`` of each), the interval edges (as ``view_edges``), the newest
        summary (condensation id, its uid, timestamp, summary, offset), the newest request's
        id and (``count``) ``batch_sizes`` up to ``upto`` for the response ids of the rows'
        actions."""
        ...

    def view_edges(self, cid: str, intervals: Sequence[Run]) -> Iterator[tuple[int, int, int | None, Any]]:
        """For each interval (s, e): the thinking action whose loop the row before s belongs
        to, if any, and whether row e + 1 is a tool event that would continue a loop."""
        ...

    def batch_sizes(self, cid: str, upto: int, rids: Iterable[str]) -> dict[str, int]:
        """How many ActionEvents with id <= upto each response id has (absent: none)."""
        ...

    # --- the history tree (see tree.py) ---------------------------------------------------

    def path(self, cid: str, at: int | None = None) -> list[Run]:
        """The intervals of ids on the path from ``at`` (None: HEAD) to the root."""
        ...

    def head(self, cid: str) -> int | None:
        ...

    def set_head(self, cid: str, head: int | None) -> None:
        ...

    def append_point(
        self, cid: str, parent: str | None, count: Iterable[str] = ()
    ) -> tuple[int, bool, dict[str, int]] | None:
        ...

    def uid_of(self, cid: str, seq: int) -> str | None:
        ...

    def set_payloads(self, cid: str, payloads: Sequence[tuple[int, str]]) -> None:
        ...

    def set_parents(self, cid: str, parents: Sequence[tuple[int, int]]) -> None:
        ...

    def set_detached(self, cid: str, seqs: Sequence[int]) -> None:
        ...

    def chains_between(self, cid: str, lo: int, hi: int) -> bool:
        ...

    def jumps(self, cid: str) -> list[tuple[int, int]]:
        ...

    def last_node(self, cid: str, lo: int, hi: int) -> int | None:
        ...

    def hidden_on_path(self, cid: str, path: Sequence[Run]) -> list[tuple[int, int, int, int | None]]:
        ...

    def close_hidden_rows(self, cid: str, until: int, keys: Iterable[tuple[int, int]]) -> None:
        ...

    def path_ends(self, cid: str, path: Sequence[Run]) -> tuple[int | None, int | None]:
        ...

    def branch_tail(
        self, cid: str, intervals: Sequence[Run], edges: Sequence[tuple[int, int, int | None, int | None]],
        path: Sequence[Run], *, once: bool = False,
    ) -> tuple[Iterator[tuple], list[tuple], tuple | None]:
        ...

    def batch_sizes_on(self, cid: str, path: Sequence[Run], rids: Iterable[str]) -> dict[str, int]:
        ...

    def copy_path(self, source: str, target: str, moves: Sequence[tuple[int, int, int]]) -> None:
        ...

    # --- token counts (see conversation/tokens.py) ------------------------------------

    def token_counts(self, cid: str, intervals: Sequence[Run]) -> dict[int, int | None]:
        """Every LLM-visible row's cached token count (None: not counted yet)."""
        ...

    def set_token_counts(self, cid: str, counts: Iterable[tuple[int, int]]) -> None:
        ...

    def clear_token_counts(self, cid: str) -> None:
        ...

    # --- the ledger -------------------------------------------------------------------

    def insert_llm_calls(self, rows: Sequence[Sequence[Any]]) -> None:
        """Rows in ``INSERT_CALL`` column order."""
        ...

    # --- what the OpenHands SDK keeps beside events (revision 0005) -------------------

    def base_state(self, cid: str) -> str | None:
        ...

    def set_base_state(self, cid: str, text: str | None) -> bool:
        """False when there is no such conversation."""
        ...

    def file_content(self, cid: str, path: str) -> bytes | None:
        ...

    def put_file(self, cid: str, path: str, content: bytes, updated_at: str) -> None:
        ...

    def file_paths(self, cid: str, prefix: str) -> list[str]:
        """Paths of the conversation's files that start with ``prefix``, in order."""
        ...

    def delete_files(self, cid: str, path: str) -> int:
        """Delete the file at ``path`` and every file under ``path/``; how many went."""
        ...

    # --- inspection: sizes ------------------------------------------------------------

    def event_span(self, cid: str) -> tuple[int, int | None, int | None]:
        """(rows, lowest id, highest id): the count walks the primary key, nothing else."""
        ...

    def timestamp_of(self, cid: str, seq: int) -> str | None:
        ...

    def condensation_count(self, cid: str) -> int:
        ...

    def visible_counts(self, cid: str, intervals: Sequence[Run]) -> tuple[int, int, int]:
        """(LLM-visible rows, their cached tokens, how many are counted) in ``intervals``."""
        ...

    # --- inspection: statistics -------------------------------------------------------

    def condensation_totals(self, ids: Sequence[str] | None) -> list[tuple]:
        """(strategy, reason, count, tokens before, tokens after) by strategy and reason."""
        ...

    def forgotten_totals(self, ids: Sequence[str] | None) -> list[tuple]:
        """(strategy, reason, events forgotten) by strategy and reason."""
        ...

    def llm_call_totals(self, ids: Sequence[str] | None) -> list[tuple]:
        """(model, purpose, outcome, calls, prompt, completion tokens, cost, latency)."""
        ...

    # --- inspection: history ----------------------------------------------------------

    def condensation_rows(self, cid: str, start: int = 0, stop: int = 2**62) -> list[tuple]:
        """(id, strategy, reason, summary, offset, tokens before, tokens after) in [start, stop)."""
        ...

    # --- inspection: the doctor -------------------------------------------------------

    def id_gaps(self, cid: str, limit: int = 20) -> list[tuple[int, int]]:
        """(id, next id) pairs where the next id is not id + 1."""
        ...

    def unpaired_calls(self, cid: str, after: int = -1) -> list[tuple]:
        """Tool call ids (of events after ``after``) without exactly one action and one result:
        (call id, actions, results, first action id, tool name)."""
        ...

    def result_ids(self, cid: str, call_id: str) -> list[int]:
        ...

    def action_batch(self, cid: str, action_id: int) -> tuple[str | None, str | None, bool]:
        """(LLM response id, timestamp, whether an action of a later response follows) of an
        action: the doctor's test of whether its tool may still be running."""
        ...

    def hold(self, cid: str) -> None:
        """Inside a write begun without a conversation's id, hold ``cid``'s write lock until
        the transaction ends, as ``writing(cid)`` would."""
        ...

    def condensation_ids(self, cid: str, after: int = -1) -> set[int]:
        ...

    def kinds_of(self, cid: str, ids: Sequence[int]) -> dict[int, str]:
        ...

    def condensation_events(self, cid: str, after: int = -1, page: int = 200) -> Iterator[tuple[int, str]]:
        """(id, payload) of every Condensation event after ``after``, a page at a time."""
        ...

    def ranges_of(self, cid: str, condensation_id: int) -> list[Run]:
        ...

    def range_owners(self, cid: str) -> set[int]:
        """The condensation ids that forgotten ranges point at."""
        ...

    def insert_ranges(self, cid: str, condensation_id: int, runs: Sequence[Run]) -> None:
        ...

    def delete_ranges(self, cid: str, condensation_id: int) -> None:
        ...


@runtime_checkable
class BackendSession(Driver, Statements, Protocol):
    """What a backend's session provides: its driver hooks and every statement."""


DRIVER = tuple(n for n in vars(Driver) if not n.startswith("_"))
STATEMENTS = tuple(n for n in vars(Statements) if not n.startswith("_"))
