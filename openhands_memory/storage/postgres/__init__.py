"""The PostgreSQL recorder (psycopg 3): the same tables, the same SQL, one connection.

* **Gap-free ids under many writers.** A write transaction for a conversation starts with
  ``UPDATE conversation SET version = version + 1 WHERE id = ? RETURNING version``: the row
  lock it takes makes "next id = MAX(id) + 1" one writer's decision at a time, until commit
  or rollback. (A conversation being created needs no lock: its primary key refuses a
  second creator.)
* **Fresh views.** That same statement is the write's version bump; its value, read inside
  the transaction, is what ``Session.touch`` returns, and a view cache compares it with the
  version it saw. One round trip does the lock, the bump and the existence check.
* **Reads** are ``REPEATABLE READ READ ONLY`` transactions: one snapshot per view.
* **Round trips.** Every round trip to the server costs about what a one-row statement costs
  there, so ``BEGIN`` never travels alone: it is pipelined with the transaction's first
  statement (a read) or with the lock and ``MAX(id)`` (a write); a view's statements go in
  three pipelined groups (``run_all``). An append of a few events is one round trip in all
  (``PostgresRecorder.append``): the lock and an ``INSERT`` that numbers the rows itself
  from ``MAX(id) + 1``, one implicit transaction committed at the pipeline's Sync, so the
  conversation's lock is held only while the server works, never across the network.
"""

from __future__ import annotations

from .connection import PostgresRecorder
from .query import read_only_query
from .session import PostgresSession

__all__ = ["PostgresRecorder", "PostgresSession", "read_only_query"]
