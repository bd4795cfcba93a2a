"""Alembic environment: the target is openhands-memory's SQLModel metadata.

The database comes from, in order: a connection handed over by the library
(``config.attributes["connection"]``), ``alembic -x db=PATH``, or ``sqlalchemy.url``.
SQLite cannot ALTER most things in place, so every revision runs in batch mode.
"""

from alembic import context
from sqlalchemy import create_engine

from openhands_memory.schema import metadata

config = context.config


def _url() -> str:
    """A SQLAlchemy URL: a file path means SQLite; postgresql:// goes through psycopg 3."""
    from openhands_memory.location import Location

    db = context.get_x_argument(as_dictionary=True).get("db") or config.get_main_option("sqlalchemy.url")
    return Location.parse(db).sqlalchemy_url


def _include_name(name, type_, parent_names) -> bool:
    """The search index (revision 0008, storage/search.py) is not in the SQLModel metadata:
    SQLite's FTS5 tables (and their shadow tables) and queue, PostgreSQL's texts and their
    indexes (and, before revision 0012, its expression indexes), the watermarks."""
    if type_ == "table" and name and name.startswith(
            ("event_words", "event_grams", "search_pending", "search_state", "event_text")):
        return False
    return not (type_ == "index" and name in ("ix_event_words", "ix_event_grams", "ix_event_text_words",
                                              "ix_event_text_grams"))


def _configure(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=True,
        compare_type=True,
        include_name=_include_name,
    )


def run_migrations_offline() -> None:
    context.configure(
        url=_url(), target_metadata=metadata, render_as_batch=True, literal_binds=True
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(_url())
    with engine.connect() as connection:
        if connection.dialect.name == "sqlite":
            # Batch mode copies tables; foreign keys must be off while it does.
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()  # the PRAGMA autobegan a transaction; alembic must own its own
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
