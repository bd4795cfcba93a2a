"""Full-text search (``storage/search.py``) and what recall reads around a hit."""

from __future__ import annotations

from typing import Any, Sequence

from ...searchable import fold_nul
from .. import search, search_waiting
from ..search import SearchFilters
from .driver import Driver, chunks


class SearchStatements(Driver):
    """Full-text search: statements over the shared driver."""

    def search_index_on(self) -> bool:
        """Whether the database keeps the full-text index (it may be switched off)."""
        return search.sqlite_on(self.execute)

    def set_search_index(self, on: bool, progress: search.Progress | None = None) -> bool:
        """Build the index (every stored event, with ``progress``) or drop it; whether that
        changed anything."""
        if on == self.search_index_on():
            return False
        if on:
            self._create_search_index(progress)
        else:
            self._drop_search_index()
        return True

    def _create_search_index(self, progress: search.Progress | None) -> None:
        search.create_sqlite(self.execute, progress)

    def _drop_search_index(self) -> None:
        search.drop_sqlite(self.execute)

    def _search_key(self, cid: str) -> int | None:
        """The conversation's number in the search index's document ids (SQLite)."""
        row = self.execute("SELECT search_key FROM conversation WHERE id = ?", (cid,)).fetchone()
        return None if row is None else row[0]

    def _search_filters(self, filters: SearchFilters) -> tuple[str, list[Any]]:
        where, params = "", []
        if filters.kinds:
            where += f" AND e.kind IN ({', '.join('?' for _ in filters.kinds)})"
            params += list(filters.kinds)
        if filters.tools:
            where += f" AND e.tool_name IN ({', '.join('?' for _ in filters.tools)})"
            params += list(filters.tools)
        if filters.before is not None:
            where += " AND e.timestamp < ?"
            params.append(filters.before)
        if filters.after is not None:
            where += " AND e.timestamp > ?"
            params.append(filters.after)
        return where, params

    def search_words(self, cid: str, terms: Sequence[str], upto: int, limit: int,
                     filters: SearchFilters) -> list[tuple[int, float]]:
        """(id, score: higher is better) of the newest events up to ``upto`` whose text has
        every one of ``terms`` (words, stemmed; a term of several words is a phrase), newest
        first: indexed ones, and those above the watermark by the index's rules
        (``search_waiting.py``)."""
        key = self._search_key(cid)
        if key is None or not terms:
            return []
        words = search_waiting.words_match([fold_nul(t) for t in terms])
        where, params = self._search_filters(filters)
        found = [(s, -score) for s, score in self.all(
            f"SELECT event_words.rowid & {search.MASK}, bm25(event_words) FROM event_words "
            f"JOIN event e ON e.conversation_id = ? AND e.id = event_words.rowid & {search.MASK} "
            f"WHERE event_words MATCH ? AND event_words.rowid BETWEEN ? AND ?{where} "
            f"ORDER BY event_words.rowid DESC LIMIT {int(limit)}",
            (cid, words, key << search.SHIFT, (key << search.SHIFT) | upto, *params),
        )]
        return self._newest(found, self._waiting_words(cid, words, upto, limit, filters), limit)

    #: The waiting texts of the conversation searched last, in FTS5 (SQLite), kept in step
    #: from one search to the next (``search_waiting.WaitingWords``).
    _waiting: search_waiting.WaitingWords | None = None

    def _waiting_words(self, cid: str, words: str, upto: int, limit: int,
                       filters: SearchFilters) -> list[tuple[int, float]]:
        """(id, score) of the newest events above ``cid``'s watermark, up to ``upto``, kept
        by ``filters``, whose text matches the FTS5 query ``words`` as the index would."""
        where, params = self._search_filters(filters)
        rows = self.all(
            f"SELECT e.id, e.kind, CAST(e.payload AS BLOB), 1{where} FROM event e WHERE e.conversation_id = ? "
            f"AND e.id > {search.upto_of('?')} AND e.kind IN ({search.KIND_LIST})",
            (*params, cid, cid),
        )
        if self._waiting is None or self._waiting.conversation_id != cid:
            if self._waiting is not None:
                self._waiting.close()
            self._waiting = search_waiting.WaitingWords(cid)
        self._waiting.sync({i: (kind, payload) for i, kind, payload, _ in rows}, lambda ids: self._texts(cid, ids))
        return self._waiting.match(words, upto, limit, {i for i, _, _, kept in rows if kept})

    def _texts(self, cid: str, ids: Sequence[int]) -> list[tuple[int, str | None]]:
        """(id, searchable text as the index spells it) of these events."""
        found: list[tuple[int, str | None]] = []
        for chunk in chunks(list(ids), 500):
            found += self.all(f"SELECT e.id, {self.TEXT_OF_EVENT} FROM event e WHERE e.conversation_id = ? "
                              f"AND e.id IN ({', '.join('?' for _ in chunk)})", (cid, *chunk))
        return found

    @staticmethod
    def _newest(found: list[Any], waiting: list[Any], limit: int) -> list[Any]:
        """The indexed matches and those waiting above the watermark, newest first."""
        return sorted(waiting + found, reverse=True)[:limit] if waiting else found

    #: SQL: the searchable text of event ``e``, as the index spells it.
    TEXT_OF_EVENT = search.sqlite_text("e.payload")
    #: The backend, as ``search_waiting.raw_filter`` names it.
    RAW_BACKEND = "sqlite"

    def _holds(self, fragment: str) -> tuple[str, str]:
        """SQL over a lowered text ``t`` holding ``fragment``, and its parameter: the test the
        index confirms a trigram candidate with (``search_grams``)."""
        return "instr(t, lower(?)) > 0", fragment

    def _waiting_grams(self, cid: str, fragment: str, upto: int, filters: SearchFilters) -> list[int]:
        """Ids of the events above the index's watermark whose text holds ``fragment`` (any
        case), newest first: the newest events, not indexed yet (storage/search.py). Up to
        FLUSH_AT of them: the JSON of each is first searched as it is stored, and only those
        that may hold it are spelled (some 5 us each)."""
        where, params = self._search_filters(filters)
        raw = search.raw_safe(fragment)
        if raw:
            where += " AND " + search_waiting.raw_filter(fragment, self.RAW_BACKEND)
            params.append(search.like_pattern(fragment))
        holds, needle = self._holds(fragment)
        return [s for (s,) in self.all(
            f"SELECT seq FROM (SELECT e.id AS seq, lower({self.TEXT_OF_EVENT}) AS t FROM event e "
            f"WHERE e.conversation_id = ? AND e.id > {search.upto_of('?')} AND e.id <= ? "
            f"AND e.kind IN ({search.KIND_LIST}){where}) AS waiting WHERE {holds} ORDER BY seq DESC",
            (cid, cid, upto, *params, needle),
        )]

    def search_grams(self, cid: str, fragment: str, upto: int, limit: int,
                     filters: SearchFilters) -> list[int]:
        """Ids of the newest events up to ``upto`` whose text holds ``fragment`` (three
        characters or more, any case), newest first."""
        key = self._search_key(cid)
        fragment = fold_nul(fragment)
        if key is None or len(fragment) < 3:
            return []
        where, params = self._search_filters(filters)
        found = [s for (s,) in self.all(
            f"SELECT event_grams.rowid & {search.MASK} FROM event_grams "
            f"JOIN event e ON e.conversation_id = ? AND e.id = event_grams.rowid & {search.MASK} "
            f"WHERE event_grams MATCH ? AND event_grams.rowid BETWEEN ? AND ?{where} "
            f"AND instr(lower({search.sqlite_text('e.payload')}), lower(?)) > 0 "
            f"ORDER BY event_grams.rowid DESC LIMIT {int(limit)}",
            (cid, search_waiting.gram_match(fragment), key << search.SHIFT, (key << search.SHIFT) | upto,
             *params, fragment),
        )]
        waiting = self._waiting_grams(cid, fragment, upto, filters)
        return self._newest(found, waiting, limit)

    def hidden_by(self, cid: str, seq: int) -> int | None:
        """The condensation whose live hidden run holds ``seq`` (ix_hidden_run_live)."""
        row = self.execute(
            "SELECT from_id, end_id FROM hidden_run WHERE conversation_id = ? AND until_id IS NULL "
            "AND start_id <= ? ORDER BY start_id DESC LIMIT 1",
            (cid, seq),
        ).fetchone()
        return row[0] if row is not None and row[1] >= seq else None

    def results_near(self, cid: str, seq: int, call_id: str, span: int = 256) -> list[int]:
        """Ids near ``seq`` (a primary-key range) holding tool call ``call_id``: a call's
        result, a result's call."""
        return [s for (s,) in self.all(
            "SELECT id FROM event WHERE conversation_id = ? AND id BETWEEN ? AND ? AND tool_call_id = ? AND id <> ?",
            (cid, seq - span, seq + span, call_id, seq),
        )]

    def event_rows(self, cid: str, seqs: Sequence[int]) -> list[tuple[int, str, str, str | None, str, str]]:
        """(id, uid, kind, tool_name, timestamp, payload) of the events with these ids."""
        found: list[tuple[int, str, str, str | None, str, str]] = []
        for chunk in chunks(sorted(set(seqs)), 500):
            found += self.all(
                "SELECT id, uid, kind, tool_name, timestamp, payload FROM event WHERE conversation_id = ? "
                f"AND id IN ({', '.join('?' for _ in chunk)}) ORDER BY id",
                (cid, *chunk),
            )
        return found

