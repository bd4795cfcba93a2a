"""The PostgreSQL search index as revisions 0008 to 0011 kept it: two GIN expression indexes
on ``event``, kept in every writing transaction, each spelling the event's text again.

Frozen here for the migration that made it (0008) and the one that replaces it by a table of
texts behind a watermark (0012, ``search_watermark.py``): a migration must build what its
revision built, not what the code builds today. Nothing else uses it.
"""

from __future__ import annotations

from .search_watermark import KIND_LIST, Progress, Run
from .search_text_v1 import PG_FUNCTION

WORDS_INDEX, GRAMS_INDEX = "ix_event_words", "ix_event_grams"
_TEXT = "ohm_search_text(kind, payload)"
_WHERE = f"kind IN ({KIND_LIST})"
INDEXES = (
    f"CREATE INDEX {WORDS_INDEX} ON event USING gin (id, to_tsvector('english'::regconfig, {_TEXT})) "
    f"WHERE {_WHERE}",
    f"CREATE INDEX {GRAMS_INDEX} ON event USING gin (id, {_TEXT} gin_trgm_ops) WHERE {_WHERE}",
)


def create(run: Run, progress: Progress | None = None) -> None:
    run("CREATE EXTENSION IF NOT EXISTS pg_trgm", ())
    run("CREATE EXTENSION IF NOT EXISTS btree_gin", ())
    run(PG_FUNCTION, ())
    for statement in INDEXES:  # one statement each: PostgreSQL builds it, no progress to show
        run(statement, ())


def drop_indexes(run: Run) -> None:
    run(f"DROP INDEX IF EXISTS {GRAMS_INDEX}", ())
    run(f"DROP INDEX IF EXISTS {WORDS_INDEX}", ())


def drop(run: Run) -> None:
    drop_indexes(run)
    run("DROP FUNCTION IF EXISTS ohm_search_text(text, text)", ())


def on(run: Run) -> bool:
    """Whether the database keeps this index (``search-index off`` dropped it)."""
    rows = run("SELECT COUNT(*) FROM pg_indexes WHERE schemaname = current_schema() "
               f"AND indexname = '{WORDS_INDEX}'", ()).fetchall()
    return rows[0][0] == 1
