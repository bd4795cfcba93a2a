"""The events above a conversation's watermark, matched by the index's own rules.

A conversation's newest events wait above its watermark until a flush indexes them
(``storage/search.py``). A search reads them too, and must answer as the index will once
they are flushed: the same words (case and accents folded, stems, punctuation and emoji
that are no word), the same fragments, so that no answer depends on where the watermark is.

* Words. SQLite: the waiting texts go into an FTS5 table of the index's own tokenizer, in
  memory (``WaitingWords``), and the query is matched there as it is in ``event_words``.
  It is a connection of its own: the database's may be read-only, and ``query_only``
  refuses even a temporary table. PostgreSQL: the index's expressions (``ohm_words`` of the
  lowered text, ``plainto_tsquery``), computed for the waiting rows.
* Fragments: the index confirms each trigram candidate against the text (SQLite: ``instr``
  of the lowered texts; PostgreSQL: ``LIKE`` on the lowered text), and a waiting text is
  tested the same way. Before it is spelled, its stored JSON is searched for the fragment
  (``search.raw_safe``: a needle no encoder escapes): ``raw_filter`` adds the JSON that may
  hold the fragment in another form, so that the shortcut never drops a match.
"""

from __future__ import annotations

import sqlite3
from typing import Callable, Iterable, Sequence

from . import search

#: The most trigrams a fragment is looked up by in FTS5. Every candidate is confirmed
#: against its text, so a subset of the fragment's trigrams finds the same events: spread
#: along it, 32 are as selective as all of them, where a fragment of 10,000 characters
#: parsed into 9,998 phrases took 60 ms.
MAX_GRAMS = 32


def words_match(terms: Sequence[str]) -> str:
    """An FTS5 query having every term, each a phrase (quotes doubled): the same string for
    ``event_words`` and for the waiting texts."""
    return " ".join('"' + t.replace('"', '""') + '"' for t in terms)


def gram_match(fragment: str) -> str:
    """An FTS5 query for ``event_grams`` (three characters or more): the AND of up to
    ``MAX_GRAMS`` of its trigrams, the first and the last among them."""
    starts = range(len(fragment) - 2)
    if len(starts) > MAX_GRAMS:
        step = (len(starts) - 1) / (MAX_GRAMS - 1)
        starts = sorted({round(k * step) for k in range(MAX_GRAMS)})
    return " ".join('"' + fragment[i:i + 3].replace('"', '""') + '"' for i in starts)


#: A JSON text holds the ``\u0000`` escape (SQLite; PostgreSQL spells ``char`` as ``chr``).
_NUL_ESCAPE = "{find}(e.payload, {char}(92) || 'u0000') > 0"
#: PostgreSQL lowers a few characters outside ASCII to ASCII letters (U+212A KELVIN SIGN to
#: "k", U+0130 to "i", in C.UTF-8; a collation may know more), which ``ILIKE`` on the JSON
#: finds only where the encoder wrote them as they are: a JSON text holding a ``\\u`` escape
#: of a character above U+001F (a control character lowers to itself) may hold one.
_PG_ESCAPED = "e.payload ~ (chr(92) || chr(92) || 'u([^0]|0[^0]|00[^01])')"  # (no "?": a placeholder)


def raw_filter(needle: str, backend: str) -> str:
    """SQL over event ``e``, with one ``like_pattern(needle)`` parameter: true for every
    stored JSON whose text may hold ``needle`` (a ``raw_safe`` one), any case. Its JSON
    holds it verbatim, unless the text's NUL reads as the needle's space (``\\u0000`` in the
    JSON), or (PostgreSQL) the text holds an escaped character that lowers to ASCII."""
    if backend == "sqlite":
        holds, nul = "e.payload LIKE ? ESCAPE '\\'", _NUL_ESCAPE.format(find="instr", char="char")
        others = [nul] if " " in needle else []
    else:
        holds, nul = "e.payload ILIKE ?", _NUL_ESCAPE.format(find="strpos", char="chr")
        others = [_PG_ESCAPED] + ([nul] if " " in needle else [])
    return f"({' OR '.join([holds, *others])})"


class WaitingWords:
    """The waiting texts of one conversation in an in-memory FTS5 table of ``event_words``'
    tokenizer: a word query matched here gives what the index gives once they are flushed.

    Kept from one search to the next (a conversation's waiting events change by an append or
    two between an agent's searches, and tokenizing a thousand texts of 2 KB took 60 ms): each
    search hands ``sync`` the waiting rows as stored, and only the rows that are new or differ
    from those the table was made from (their kind and JSON, byte for byte) are spelled and
    tokenized again; rows no longer waiting (flushed, deleted) leave."""

    def __init__(self, conversation_id: str):
        self.conversation_id = conversation_id
        self.db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        # Content kept (not contentless): a row is taken out by its id alone.
        self.db.execute(f"CREATE VIRTUAL TABLE w USING fts5(body, tokenize='{search.WORDS_TOKENIZER}')")
        self.rows: dict[int, tuple[str, bytes]] = {}  # id: (kind, JSON) the table's text was spelled from

    def sync(self, rows: dict[int, tuple[str, bytes]], spell: Callable[[list[int]], Iterable[tuple[int, str | None]]]) -> None:
        """Make the table hold the texts of ``rows`` (id: (kind, JSON), the waiting events as
        stored now); ``spell(ids)`` gives (id, text) of those it must spell, as the index
        would (None: no text)."""
        gone = [i for i, row in self.rows.items() if rows.get(i) != row]
        new = [i for i, row in rows.items() if self.rows.get(i) != row]
        if not gone and not new:
            return
        # One transaction: FTS5 writes a segment per transaction (five times the cost).
        self.db.execute("BEGIN")
        try:
            self.db.executemany("DELETE FROM w WHERE rowid = ?", [(i,) for i in gone])
            self.db.executemany("INSERT INTO w(rowid, body) VALUES (?, ?)",
                                [(i, text) for i, text in spell(new) if text is not None])
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            self.rows = {}  # (the table is as it was, but start again rather than trust it)
            self.db.execute("DELETE FROM w")
            raise
        self.rows = dict(rows)

    def match(self, words: str, upto: int, limit: int, kept: set[int]) -> list[tuple[int, float]]:
        """(id, score: higher is better) of the newest texts up to id ``upto`` among ``kept``
        (the filters') matching the FTS5 query ``words``, newest first; bm25 among the waiting
        texts."""
        found = self.db.execute("SELECT rowid, bm25(w) FROM w WHERE w MATCH ? AND rowid <= ? ORDER BY rowid DESC",
                                (words, upto))
        return [(s, -score) for s, score in found if s in kept][:limit]

    def close(self) -> None:
        self.db.close()


def problems(run: search.Run, backend: str) -> list[str]:
    """What ``doctor --full`` finds of the texts waiting above their watermarks: one the
    next flush cannot index (its JSON cannot be read; on PostgreSQL, a function that cannot
    spell it, as ``ohm_search_text`` could not spell a NUL before revision 0015) fails that
    flush, and with it every append of its conversation from then on. Each conversation is
    named with its first such event. Nothing when the index is off or every text can be
    indexed (one statement spells them all)."""
    sqlite = backend == "sqlite"
    if not (search.sqlite_on(run) if sqlite else search.postgres_on(run)):
        return []
    # What the flush computes of each text: its spelling and, on PostgreSQL, its words.
    indexed = search.sqlite_text("e.payload") if sqlite else f"ohm_words({search.PG_BODY_OF.format(e='e')})"
    waiting = f"e.kind IN ({search.KIND_LIST}) AND e.id > {search.upto_of('e.conversation_id')}"

    def failure(where: str, params: tuple) -> str | None:
        """Why the texts of the waiting events ``where`` selects cannot be indexed, if so.
        (PostgreSQL: in a savepoint, which an error rolls back, not the transaction.)"""
        if not sqlite:
            run("SAVEPOINT ohm_doctor_texts", ())
        try:
            run(f"SELECT COUNT(*) FROM event e WHERE {waiting}{where} AND {indexed} IS NOT NULL", params).fetchall()
        except Exception as e:  # the database's own error, whichever: it is the finding
            if not sqlite:
                run("ROLLBACK TO SAVEPOINT ohm_doctor_texts", ())
            return (str(e).strip().splitlines() or [type(e).__name__])[0]
        if not sqlite:
            run("RELEASE SAVEPOINT ohm_doctor_texts", ())
        return None

    if failure("", ()) is None:
        return []
    found = []
    flush_at = search.FLUSH_AT if sqlite else search.PG_FLUSH_AT
    for (cid,) in run(f"SELECT DISTINCT e.conversation_id FROM event e WHERE {waiting} ORDER BY 1", ()).fetchall():
        if failure(" AND e.conversation_id = ?", (cid,)) is None:
            continue
        ids = [i for (i,) in run(f"SELECT e.id FROM event e WHERE {waiting} AND e.conversation_id = ? ORDER BY e.id",
                                 (cid,)).fetchall()]
        first, why = next((i, w) for i in ids for w in [failure(" AND e.conversation_id = ? AND e.id = ?", (cid, i))]
                          if w is not None)
        found.append(f"search: conversation {cid}: the text of event {first}, waiting above the index's "
                     f"watermark, cannot be indexed ({why}): the flush {flush_at} events past the watermark "
                     "will fail, and every append of the conversation with it")
    return found
