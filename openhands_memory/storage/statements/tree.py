"""The history tree (``storage/tree.py``): parents where they jump, HEAD, paths, branches,
forks."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Sequence

from ... import ranges
from ...ranges import Run
from ..codec import EVENT_COLUMNS
from .driver import (
    CHUNK,
    END,
    INSERT_RANGE,
    LOOP_EDGE,
    NON_NODE_LIST,
    ON_PATH,
    PATH,
    TOOL_KIND_LIST,
    VIEW_ROW_COLUMNS,
    Driver,
    chunks,
)


class TreeStatements(Driver):
    """The history tree: statements over the shared driver."""

    def path_statement(self, cid: str, at: int | None) -> tuple[str, list[Any]]:
        return PATH, [cid, at, cid, cid, cid, cid]

    def path(self, cid: str, at: int | None = None) -> list[Run]:
        """The intervals of ids on the path from ``at`` (None: HEAD) to the root, oldest
        first; empty for an empty HEAD."""
        text, params = self.path_statement(cid, at)
        return sorted((s, e) for s, e in self.all(text, params))

    def head(self, cid: str) -> int | None:
        """HEAD as stored: None while it is the newest row, -1 when empty, else an id."""
        return self.one("SELECT head FROM conversation WHERE id = ?", (cid,))

    def set_head(self, cid: str, head: int | None) -> None:
        self.execute("UPDATE conversation SET head = ? WHERE id = ?", (head, cid))

    def append_point(
        self, cid: str, parent: str | None, count: Iterable[str] = ()
    ) -> tuple[int, bool, dict[str, int]] | None:
        """Where an append goes, in one statement (an append asks it every time): the next
        id; whether a row there whose event names ``parent`` (an external id, or None) simply
        follows the newest row (HEAD is the newest row, and the event names no parent or that
        row: see tree.py); and ``batch_sizes`` up to the newest row for the response ids in
        ``count`` (one is counted in the same statement: a step's new action). None when
        there is no such conversation."""
        rids = sorted(set(count))
        one = rids if len(rids) == 1 else []
        # Hinted off conversation_id and id as batch_sizes_sql is: the response-id index.
        counted = (f", (SELECT COUNT(*) FROM event WHERE {self.no_index('conversation_id')} = c.id "
                   f"AND kind = 'ActionEvent' AND {self.no_index('id')} <= m.last AND llm_response_id = ?)"
                   if one else "")
        row = self.execute(
            "SELECT m.last, c.head IS NULL AND (CAST(? AS TEXT) IS NULL OR (SELECT uid FROM event "
            f"WHERE conversation_id = c.id AND id = m.last) = CAST(? AS TEXT)){counted} FROM conversation c, "
            "(SELECT MAX(id) AS last FROM event WHERE conversation_id = ?) m WHERE c.id = ?",
            (parent, parent, *one, cid, cid),
        ).fetchone()
        if row is None:
            return None
        first = (-1 if row[0] is None else row[0]) + 1
        if one:
            counts = {one[0]: row[2]} if row[2] else {}
        else:
            counts = self.batch_sizes(cid, first - 1, rids) if rids else {}
        return first, bool(row[1]), counts

    def uid_of(self, cid: str, seq: int) -> str | None:
        return self.one("SELECT uid FROM event WHERE conversation_id = ? AND id = ?", (cid, seq))

    def set_payloads(self, cid: str, payloads: Sequence[tuple[int, str]]) -> None:
        """Rewrite rows' JSON (a fork renumbers what its Condensations forgot by id)."""
        self.executemany(
            "UPDATE event SET payload = ? WHERE conversation_id = ? AND id = ?",
            [(text, cid, seq) for seq, text in payloads],
        )

    def set_parents(self, cid: str, parents: Sequence[tuple[int, int]]) -> None:
        """(id, parent id) of rows whose parent is not the row before them (-1: a root)."""
        self.executemany(
            "UPDATE event SET parent_seq = ? WHERE conversation_id = ? AND id = ?",
            [(parent, cid, seq) for seq, parent in parents],
        )

    def set_detached(self, cid: str, seqs: Sequence[int]) -> None:
        """Mark non-node rows that the next event skips (see tree.py)."""
        self.executemany(
            "UPDATE event SET detached = TRUE WHERE conversation_id = ? AND id = ?", [(cid, seq) for seq in seqs]
        )

    def chains_between(self, cid: str, lo: int, hi: int) -> bool:
        """Whether every row with an id in [lo, hi] is a non-node whose parent is the row
        before it: then a row after them whose parent is lo - 1 continues lo - 1's branch."""
        return self.one(
            "SELECT 1 FROM event WHERE conversation_id = ? AND id BETWEEN ? AND ? "
            f"AND (kind NOT IN ({NON_NODE_LIST}) OR parent_seq IS NOT NULL) LIMIT 1",
            (cid, lo, hi),
        ) is None

    def jumps(self, cid: str) -> list[tuple[int, int]]:
        """(id, parent) of every row whose parent is not the row before it, by id."""
        return self.all(
            "SELECT id, parent_seq FROM event WHERE conversation_id = ? AND parent_seq IS NOT NULL ORDER BY id",
            (cid,),
        )

    def last_node(self, cid: str, lo: int, hi: int) -> int | None:
        """The newest row in [lo, hi] that is a node of the tree."""
        return self.one(
            "SELECT MAX(id) FROM event WHERE conversation_id = ? AND id BETWEEN ? AND ? "
            f"AND kind NOT IN ({NON_NODE_LIST})",
            (cid, lo, hi),
        )

    def hidden_on_path(self, cid: str, path: Sequence[Run]) -> list[tuple[int, int, int, int | None]]:
        """(from, start, end, until) of the hidden runs in force on a path: written by a
        condensation on it, and not merged away by one on it. The live runs (few, from their
        partial index), then the merged ones whose merger lies in a gap of the path or past
        its leaf (spelled out, read from the covering index ``ix_hidden_run_path``)."""
        cte, params = self.intervals_cte(path)
        gaps = [(a[1] + 1, b[0] - 1) for a, b in zip(path, path[1:]) if b[0] > a[1] + 1]
        closed_off = "".join(" OR h.until_id BETWEEN ? AND ?" for _ in gaps)
        return self.all(
            cte + "SELECT h.from_id, h.start_id, h.end_id, h.until_id FROM hidden_run h "
            "WHERE h.conversation_id = ? AND h.until_id IS NULL "
            "AND EXISTS (SELECT 1 FROM iv WHERE h.from_id BETWEEN iv.s AND iv.e) "
            "UNION ALL SELECT h.from_id, h.start_id, h.end_id, h.until_id FROM iv JOIN hidden_run h "
            "ON h.conversation_id = ? AND h.from_id BETWEEN iv.s AND iv.e "
            f"WHERE h.until_id IS NOT NULL AND (h.until_id > ?{closed_off}) ORDER BY 2",
            [*params, cid, cid, path[-1][1], *[x for gap in gaps for x in gap]],
        )

    def close_hidden_rows(self, cid: str, until: int, keys: Iterable[tuple[int, int]]) -> None:
        """Close the live runs ``(from, start)`` (``close_hidden`` where several branches may
        each have a live run starting at one id)."""
        self.executemany(
            "UPDATE hidden_run SET until_id = ? WHERE conversation_id = ? AND until_id IS NULL "
            "AND from_id = ? AND start_id = ?",
            [(until, cid, f, s) for f, s in keys],
        )

    def path_ends(self, cid: str, path: Sequence[Run]) -> tuple[int | None, int | None]:
        """(the newest condensation, the newest request) on a path."""
        cte, params = self.intervals_cte(path)
        row = self.execute(
            cte + "SELECT (SELECT MAX(c) FROM (SELECT (SELECT MAX(id) FROM condensation WHERE conversation_id = ? "
            "AND id BETWEEN iv.s AND iv.e) AS c FROM iv) x), "
            "(SELECT MAX(r) FROM (SELECT (SELECT MAX(id) FROM event WHERE conversation_id = ? "
            "AND id BETWEEN iv.s AND iv.e AND kind = 'CondensationRequest') AS r FROM iv) y)",
            [*params, cid, cid],
        ).fetchone()
        return row[0], row[1]

    def branch_tail(
        self, cid: str, intervals: Sequence[Run], edges: Sequence[tuple[int, int, int | None, int | None]],
        path: Sequence[Run], *, once: bool = False,
    ) -> tuple[Iterator[tuple], list[tuple], tuple | None]:
        """``view_tail`` for a view whose path branches: the rows of ``intervals``; the edges
        of each (s, e, the row before s on the path when it is hidden, the row after e when
        hidden), as ``view_edges``; the newest summary on the path."""
        rows = self.interval_statements(cid, intervals, VIEW_ROW_COLUMNS, ON_PATH)
        edge_sql = []
        for part in chunks(edges, CHUNK):
            values = ", ".join("(CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT))"
                               for _ in part)
            edge_sql.append((
                f"WITH iv(s, e, p, n) AS (VALUES {values}) SELECT iv.s, iv.e, "
                "(SELECT CASE WHEN kind = 'ActionEvent' AND has_thinking THEN id END FROM event "
                f"WHERE conversation_id = ? AND id <= iv.p AND {LOOP_EDGE} AND detached IS NULL "
                "ORDER BY id DESC LIMIT 1), "
                f"(SELECT kind IN ({TOOL_KIND_LIST}) AND NOT has_thinking FROM event "
                "WHERE conversation_id = ? AND id = iv.n) FROM iv",
                [*[x for quad in part for x in quad], cid, cid],
            ))
        cte, params = self.intervals_cte(path)
        summary = (
            cte + "SELECT c.id, e.uid, e.timestamp, c.summary, c.summary_offset FROM condensation c "
            "JOIN event e ON e.conversation_id = c.conversation_id AND e.id = c.id "
            "WHERE c.conversation_id = ? AND c.id = (SELECT MAX(m) FROM (SELECT (SELECT MAX(id) FROM condensation "
            "WHERE conversation_id = ? AND id BETWEEN iv.s AND iv.e AND summary IS NOT NULL "
            "AND summary_offset IS NOT NULL) AS m FROM iv) x)",
            [*params, cid, cid],
        )
        found_rows, results = self.run_streaming(rows, [*edge_sql, summary], once=once)
        found_edges = [r for part in results[: len(edge_sql)] for r in part]
        return found_rows, found_edges, (results[-1][0] if results[-1] else None)

    def batch_sizes_on(self, cid: str, path: Sequence[Run], rids: Iterable[str]) -> dict[str, int]:
        """``batch_sizes`` counting only the actions on a path."""
        out: dict[str, int] = {}
        for chunk in chunks(sorted(rids), 500):
            cte, params = self.intervals_cte(path)
            out.update(self.all(
                cte + f"SELECT llm_response_id, COUNT(*) FROM event WHERE {self.no_index('conversation_id')} = ? "
                f"AND kind = 'ActionEvent' AND llm_response_id IN ({', '.join('?' for _ in chunk)}) "
                "AND EXISTS (SELECT 1 FROM iv WHERE id BETWEEN iv.s AND iv.e) GROUP BY llm_response_id",
                [*params, cid, *chunk],
            ))
        return out

    def copy_path(self, source: str, target: str, moves: Sequence[tuple[int, int, int]]) -> None:
        """Copy the rows of a path into another conversation (a fork): ``moves`` are
        (start, end, shift) per interval; each row lands at its id plus shift, and so do the
        condensations among them. Their forgotten ranges are cut per interval, each part
        moved by its own interval's shift (a range that spans a jump of the path, written
        before ranges were cut at jumps, names rows of other branches between its parts);
        the hidden runs are the caller's to rebuild."""
        cols = [c for c in EVENT_COLUMNS if c not in ("conversation_id", "id")]
        for s, e, shift in moves:
            self.execute(
                f"INSERT INTO event (conversation_id, id, {', '.join(cols)}) "
                f"SELECT ?, id + ?, {', '.join(cols)} FROM event WHERE conversation_id = ? AND id BETWEEN ? AND ?",
                (target, shift, source, s, e),
            )
            self.execute(
                "INSERT INTO condensation (conversation_id, id, summary, summary_offset, strategy, reason, config, "
                "tokens_before, tokens_after) SELECT ?, id + ?, summary, summary_offset, strategy, reason, config, "
                "tokens_before, tokens_after FROM condensation WHERE conversation_id = ? AND id BETWEEN ? AND ?",
                (target, shift, source, s, e),
            )
        runs: dict[int, list[Run]] = {}
        for s, e, _ in moves:
            for cond, start, end in self.all(
                "SELECT condensation_id, start_id, end_id FROM forgotten_range "
                "WHERE conversation_id = ? AND condensation_id BETWEEN ? AND ?", (source, s, e),
            ):
                runs.setdefault(cond, []).append((start, end))
        out = []
        for cond, forgot in runs.items():
            shift = next(d for s, e, d in moves if s <= cond <= e)
            before = [(s, min(e, cond - 1), d) for s, e, d in moves if s < cond]  # its own path
            out += [(target, cond + shift, a, b) for a, b in ranges.moved(forgot, before)]
        self.executemany(INSERT_RANGE, out)
