"""The SQLite search index as revisions 0008 to 0010 kept it: a queue of events to index
(``search_pending``), flushed into the FTS5 tables by a trigger every ``FLUSH_AT`` events.

Frozen here for the migrations that made it (0008, 0010) and the one that replaces it by a
watermark (0011, ``search_watermark.py``): a migration must build what its revision built, not
what the code builds today. Nothing else uses it.
"""

from __future__ import annotations

from .search_watermark import GRAMS, KIND_LIST, SHIFT, WORDS, Progress, Run, _scalar
from .search_text_v1 import sqlite_text


def _doc(row: str) -> str:
    return (f"(((SELECT search_key FROM conversation WHERE id = {row}.conversation_id) << {SHIFT}) "
            f"| {row}.id)")


PENDING = "search_pending"
#: Events wait in ``search_pending`` until this many have, then go into the FTS5 tables in
#: one batch: FTS5 writes a segment per transaction, and one per appended event cost 1.5 ms;
#: each segment is then merged into larger ones, so fewer, larger ones cost less again
#: (revision 0010: 1,024 and ``AUTOMERGE`` made single appends 1.6x faster than 128 and 4).
FLUSH_AT = 1024
#: Segments of one size FTS5 lets pile up before it merges them into one (its default: 4).
#: Fewer merges rewrite each posting fewer times; a search reads a few more segments.
AUTOMERGE = 16
PENDING_TABLE = (f"CREATE TABLE {PENDING} (n INTEGER PRIMARY KEY, doc INTEGER NOT NULL UNIQUE, "
                 "conversation_id TEXT NOT NULL, seq INTEGER NOT NULL)")
TABLES = (
    f"CREATE VIRTUAL TABLE {WORDS} USING fts5(body, content='', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    f"CREATE VIRTUAL TABLE {GRAMS} USING fts5(body, content='', tokenize='trigram', detail='none')",
    PENDING_TABLE,
    *(f"INSERT INTO {t}({t}, rank) VALUES ('automerge', {AUTOMERGE})" for t in (WORDS, GRAMS)),
)


def _pending(row: str) -> str:
    return f"EXISTS (SELECT 1 FROM {PENDING} WHERE doc = {_doc(row)})"


def _unindex(row: str, when: str) -> str:
    """Statements taking ``row`` out of the index (its pending entry, or its documents)."""
    return "".join(
        f"INSERT INTO {t}({t}, rowid, body) SELECT 'delete', {_doc(row)}, {sqlite_text(row + '.payload')} "
        f"WHERE {when} AND NOT {_pending(row)}; "
        for t in (WORDS, GRAMS)
    ) + f"DELETE FROM {PENDING} WHERE doc = {_doc(row)}; "


def _queue(row: str, when: str = "1") -> str:
    return (f"INSERT INTO {PENDING}(doc, conversation_id, seq) SELECT {_doc(row)}, {row}.conversation_id, "
            f"{row}.id WHERE {when}; ")


_LIVE = "EXISTS (SELECT 1 FROM conversation WHERE id = {row}.conversation_id)"
_FLUSH = "".join(
    f"INSERT INTO {t}(rowid, body) SELECT p.doc, {sqlite_text('e.payload')} FROM {PENDING} p "
    "JOIN event e ON e.conversation_id = p.conversation_id AND e.id = p.seq; "
    for t in (WORDS, GRAMS)
) + f"DELETE FROM {PENDING}; "
TRIGGERS = (
    f"CREATE TRIGGER event_search_insert AFTER INSERT ON event WHEN new.kind IN ({KIND_LIST}) "
    f"BEGIN {_queue('new')}END",
    # ``n`` is the queue's rowid: one more than the largest, so it counts the queue (emptied
    # by each flush) without a COUNT(*) on every append.
    f"CREATE TRIGGER search_pending_flush AFTER INSERT ON {PENDING} "
    f"WHEN new.n >= {FLUSH_AT} BEGIN {_FLUSH}END",
    # A conversation's cascade deletes its events after its row: its own trigger unindexes them.
    f"CREATE TRIGGER event_search_delete AFTER DELETE ON event WHEN old.kind IN ({KIND_LIST}) "
    f"AND {_LIVE.format(row='old')} BEGIN {_unindex('old', '1')}END",
    f"CREATE TRIGGER event_search_update AFTER UPDATE OF kind, payload ON event "
    f"WHEN old.kind IN ({KIND_LIST}) OR new.kind IN ({KIND_LIST}) BEGIN "
    f"{_unindex('old', f'old.kind IN ({KIND_LIST})')}{_queue('new', f'new.kind IN ({KIND_LIST})')}END",
    "CREATE TRIGGER conversation_search_delete BEFORE DELETE ON conversation BEGIN "
    + "".join(
        f"INSERT INTO {t}({t}, rowid, body) SELECT 'delete', (old.search_key << {SHIFT}) | e.id, "
        f"{sqlite_text('e.payload')} FROM event e WHERE e.conversation_id = old.id AND e.kind IN ({KIND_LIST}) "
        f"AND NOT EXISTS (SELECT 1 FROM {PENDING} WHERE doc = (old.search_key << {SHIFT}) | e.id); "
        for t in (WORDS, GRAMS)
    )
    + f"DELETE FROM {PENDING} WHERE conversation_id = old.id; END",
)
TRIGGER_NAMES = ("event_search_insert", "search_pending_flush", "event_search_delete", "event_search_update",
                 "conversation_search_delete")

def backfill(run: Run, progress: Progress | None = None, chunk: int = 20_000) -> int:
    """Index every event already stored, a chunk of ids at a time; returns how many."""
    total = _scalar(run, f"SELECT COUNT(*) FROM event WHERE kind IN ({KIND_LIST})") or 0
    done = 0
    keys = run("SELECT id, search_key FROM conversation ORDER BY search_key", ()).fetchall()
    for cid, key in keys:
        last = _scalar(run, "SELECT MAX(id) FROM event WHERE conversation_id = ?", (cid,))
        for lo in range(0, (last if last is not None else -1) + 1, chunk):
            text = sqlite_text("payload")
            for t in (WORDS, GRAMS):
                run(
                    f"INSERT INTO {t}(rowid, body) SELECT ({int(key)} << {SHIFT}) | id, {text} FROM event "
                    f"WHERE conversation_id = ? AND id BETWEEN ? AND ? AND kind IN ({KIND_LIST})",
                    (cid, lo, lo + chunk - 1),
                )
            done += _scalar(
                run,
                f"SELECT COUNT(*) FROM event WHERE conversation_id = ? AND id BETWEEN ? AND ? AND kind IN ({KIND_LIST})",
                (cid, lo, lo + chunk - 1),
            ) or 0
            if progress is not None:
                progress(done, total)
    return done


def create(run: Run, progress: Progress | None = None) -> None:
    for statement in TABLES:
        run(statement, ())
    backfill(run, progress)
    for statement in TRIGGERS:
        run(statement, ())


def drop(run: Run) -> None:
    for name in TRIGGER_NAMES:
        run(f"DROP TRIGGER IF EXISTS {name}", ())
    for t in (WORDS, GRAMS, PENDING):
        run(f"DROP TABLE IF EXISTS {t}", ())
