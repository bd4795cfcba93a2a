"""The events: appending rows, reading them by id or page, and the indexes a bulk load defers."""

from __future__ import annotations

from typing import Any, Sequence

from .driver import DEFERRED_EVENT_INDEXES, END, INSERT_EVENT, Driver, chunks


class EventStatements(Driver):
    """The events: statements over the shared driver."""

    def last_seq(self, cid: str, upto: int = END) -> int:
        last = self.one("SELECT MAX(id) FROM event WHERE conversation_id = ? AND id <= ?", (cid, upto))
        return -1 if last is None else last

    def insert_events(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Rows made by ``codec.event_row``."""
        self.executemany(INSERT_EVENT, rows)

    def event(self, cid: str, seq: int) -> tuple[str, str] | None:
        row = self.execute(
            "SELECT kind, payload FROM event WHERE conversation_id = ? AND id = ?", (cid, seq)
        ).fetchone()
        return None if row is None else (row[0], row[1])

    def event_page(
        self, cid: str, start: int, stop: int, limit: int, kinds: Sequence[str] | None = None,
        columns: str = "id, kind, payload",
    ) -> list[tuple]:
        """Rows with ids in ``[start, stop)``, oldest first, at most ``limit``."""
        where = "conversation_id = ? AND id >= ? AND id < ?"
        if kinds is not None:
            where += f" AND kind IN ({', '.join('?' for _ in kinds)})"
        return self.all(
            f"SELECT {columns} FROM event WHERE {where} ORDER BY id LIMIT {int(limit)}",
            (cid, start, stop, *(kinds or ())),
        )

    def seqs_of(self, cid: str, before: int, uids: Sequence[str]) -> list[tuple[int, str]]:
        """(seq, uid) of the events before ``before`` with these external ids."""
        found: list[tuple[int, str]] = []
        for chunk in chunks(list(uids), 500):
            found += self.all(
                # "+id" keeps the planner on the uid index: a range on the primary key would
                # read the whole history.
                f"SELECT id, uid FROM event WHERE conversation_id = ? AND {self.no_index('id')} < ? "
                f"AND uid IN ({', '.join('?' for _ in chunk)})",
                (cid, before, *chunk),
            )
        return found

    def defer_event_indexes(self) -> list[str]:
        """Inside a write transaction, when ``event`` holds no row yet (a new file's import):
        drop the indexes a bulk load would fill one random key at a time
        (``DEFERRED_EVENT_INDEXES``) and return the statements that build them again, which
        the loader runs once its rows are in, before it commits (``build_indexes``): built
        from the rows, sorted once, instead of kept row by row (1M events: 9 s of inserts
        against 22). Nothing may read them meanwhile (an import resolves external ids itself).
        [] when the table holds rows (building an index again would read them all) or the
        backend keeps its own way (PostgreSQL's COPY)."""
        if self.one("SELECT 1 FROM event LIMIT 1") is not None:
            return []
        names = ", ".join(f"'{n}'" for n in DEFERRED_EVENT_INDEXES)
        found = self.all(f"SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'event' "
                         f"AND name IN ({names}) ORDER BY name")
        for name, _ in found:
            self.execute(f"DROP INDEX {name}")
        return [sql for _, sql in found]

    def build_indexes(self, statements: Sequence[str]) -> None:
        """Build again the indexes ``defer_event_indexes`` dropped (their very statements)."""
        for text in statements:
            self.execute(text)
