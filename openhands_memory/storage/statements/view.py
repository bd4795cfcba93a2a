"""What a view reads (``view/query.py``): its ends, its head, its tail over the visible
intervals, and the batch sizes enforcement needs."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Sequence

from ...ranges import Run
from .driver import (
    CHUNK,
    END,
    HIDDEN_LIVE,
    LAST_REQUEST,
    LATEST_SUMMARY,
    LOOP_EDGE,
    ON_PATH,
    PIN_EVENTS,
    TOOL_KIND_LIST,
    VIEW_ENDS,
    VIEW_ROW_COLUMNS,
    Driver,
    chunks,
)


class ViewStatements(Driver):
    """What a view reads: statements over the shared driver."""

    def view_ends(self, cid: str, upto: int) -> tuple[int, int | None, int | None]:
        """(the last event id <= upto, the newest condensation <= upto, the newest overall)."""
        last, cond, newest = self.execute(VIEW_ENDS, (cid, upto, cid, upto, cid)).fetchone()
        return (-1 if last is None else last), cond, newest

    def view_head(
        self, cid: str, at: int | None
    ) -> tuple[int, int | None, int | None, list[Run] | None, list[Run], list[tuple[int, str]]]:
        """In one ``run_all``: ``view_ends`` up to ``at`` (None: all), the live hidden runs when
        they are the ones in force there (no condensation after it; else None), the path
        from the view's leaf to the root (``path``), oldest interval first, and the pin events
        up to ``at`` (``pin_events``; on any branch: the caller keeps the path's)."""
        upto = END if at is None else at
        ends, live, walk, pins = self.run_all([
            (VIEW_ENDS, (cid, upto, cid, upto, cid)), (HIDDEN_LIVE, (cid,)), self.path_statement(cid, at),
            (PIN_EVENTS, (cid, upto)),
        ])
        last, cond, newest = ends[0]
        last = -1 if last is None else last
        path = sorted((s, min(e, last)) for s, e in walk if s <= min(e, last))
        live_runs = [(s, e) for s, e in live] if cond == newest else None
        return last, cond, newest, live_runs, path, [(i, p) for i, p in pins]

    def pin_events(self, cid: str, upto: int = END) -> list[tuple[int, str]]:
        """(id, payload) of the pin events with ids up to ``upto``, oldest first."""
        return [(i, p) for i, p in self.all(PIN_EVENTS, (cid, upto))]

    def view_tail(
        self, cid: str, intervals: Sequence[Run], upto: int, *, count: bool = True, once: bool = False
    ) -> tuple[Iterator[tuple], list[tuple], tuple | None, int | None, dict[str, int]]:
        """What a view reads once its intervals are known, in one ``run_streaming``: the rows
        (``VIEW_ROW_COLUMNS`` of each, to be taken inside the transaction), the interval
        edges (as ``view_edges``), the newest summary (condensation id, its uid, timestamp,
        summary, offset), the newest request's id and (``count``) ``batch_sizes`` up to
        ``upto`` for the response ids of the rows' actions. ``once``: a long view's rows
        (``run_streaming``)."""
        rows = self.interval_statements(cid, intervals, VIEW_ROW_COLUMNS, ON_PATH)
        edges = self.edge_statements(cid, intervals)
        counts = self.batch_statements(cid, intervals, upto) if count else []
        found_rows, results = self.run_streaming(
            rows, [*edges, *counts, (LATEST_SUMMARY, (cid, upto)), (LAST_REQUEST, (cid, upto))], once=once)
        found_edges = [r for part in results[: len(edges)] for r in part]
        sizes = {rid: n for part in results[len(edges) : -2] for rid, n in part}
        summary, request = results[-2], results[-1]
        return (found_rows, found_edges, (summary[0] if summary else None), (request[0][0] if request else None),
                sizes)

    def batch_statements(self, cid: str, intervals: Sequence[Run], upto: int) -> list[tuple[str, list[Any]]]:
        """``batch_sizes`` up to ``upto`` for the response ids of the actions in ``intervals``,
        which the database finds itself: so the counts go with the statements that read those
        rows, not in a round trip after them."""
        out = []
        for part in chunks(intervals, CHUNK):
            cte, params = self.intervals_cte(part)
            actions = f"SELECT ev.llm_response_id FROM {self.interval_join} WHERE ev.kind = 'ActionEvent'{ON_PATH}"
            out.append((cte + self.batch_sizes_sql(0, actions), [*params, cid, upto, cid]))
        return out

    def interval_statements(
        self, cid: str, intervals: Sequence[Run], select: str, where: str = "", *, ordered: bool = True
    ) -> list[tuple[str, list[Any]]]:
        """The statements of ``over_intervals`` (one per CHUNK intervals)."""
        out = []
        for part in chunks(intervals, CHUNK):
            cte, params = self.intervals_cte(part)
            out.append((
                f"{cte}SELECT {select} FROM {self.interval_join}{where}{self.interval_order if ordered else ''}",
                [*params, cid],
            ))
        return out

    def over_intervals(
        self, cid: str, intervals: Sequence[Run], select: str, where: str = "", *, ordered: bool = True
    ) -> Iterator[tuple]:
        """``SELECT select`` over the event rows (``ev``) of ``intervals``, in id order
        (``ordered=False`` for an aggregate)."""
        for text, params in self.interval_statements(cid, intervals, select, where, ordered=ordered):
            yield from self.execute(text, params)

    def edge_statements(self, cid: str, intervals: Sequence[Run]) -> list[tuple[str, list[Any]]]:
        out = []
        for part in chunks(intervals, CHUNK):
            cte, params = self.intervals_cte(part)
            out.append((
                cte + "SELECT iv.s, iv.e, "
                "(SELECT CASE WHEN kind = 'ActionEvent' AND has_thinking THEN id END FROM event "
                f"WHERE conversation_id = ? AND id < iv.s AND {LOOP_EDGE} AND detached IS NULL "
                "ORDER BY id DESC LIMIT 1), "
                f"(SELECT kind IN ({TOOL_KIND_LIST}) AND NOT has_thinking FROM event "
                "WHERE conversation_id = ? AND id = iv.e + 1) FROM iv",
                [*params, cid, cid],
            ))
        return out

    def view_edges(self, cid: str, intervals: Sequence[Run]) -> Iterator[tuple[int, int, int | None, Any]]:
        """For each interval (s, e): the thinking action whose loop the row before s belongs
        to, if any, and whether row e + 1 is a tool event that would continue a loop."""
        for text, params in self.edge_statements(cid, intervals):
            yield from self.execute(text, params)

    def batch_sizes(self, cid: str, upto: int, rids: Iterable[str]) -> dict[str, int]:
        """How many ActionEvents with id <= upto each response id has (absent: none)."""
        out: dict[str, int] = {}
        for chunk in chunks(sorted(rids), 500):
            out.update(self.all(self.batch_sizes_sql(len(chunk)), (cid, upto, *chunk)))
        return out

    def batch_sizes_sql(self, n: int, ids: str | None = None) -> str:
        """``batch_sizes``' statement for ``n`` response ids (parameters: cid, upto, ids), or
        for those an SQL subquery ``ids`` selects (parameters: cid, upto, its own)."""
        return (
            f"SELECT llm_response_id, COUNT(*) FROM event WHERE {self.no_index('conversation_id')} = ? "
            # Hinted off conversation_id and id: on them the planner may pick the uid or
            # primary key index and read every row of the conversation. The partial
            # response-id index is then the only choice: one seek per batch.
            f"AND kind = 'ActionEvent' AND {self.no_index('id')} <= ? "
            f"AND llm_response_id IN ({ids or ', '.join('?' for _ in range(n))}) "
            f"GROUP BY llm_response_id"
        )

