"""The PostgreSQL recorder (psycopg 3): the same tables, the same SQL, one connection.

``connection.py`` holds the recorder (its transactions, its round trips, a lost connection
replaced; its module docstring says how ids stay gap-free under many writers),
``session.py`` the statements PostgreSQL spells its own way, ``dialect.py`` their text,
``fast_append.py`` libpq's COPY path and ``query.py`` the ``sql`` command's runner.
"""

from __future__ import annotations

from .connection import PostgresRecorder
from .query import read_only_query
from .session import PostgresSession

__all__ = ["PostgresRecorder", "PostgresSession", "read_only_query"]
