"""The ledger of model calls."""

from __future__ import annotations

from typing import Any, Sequence

from .driver import INSERT_CALL, Driver


class LedgerStatements(Driver):
    """The ledger of model calls: statements over the shared driver."""

    def insert_llm_calls(self, rows: Sequence[Sequence[Any]]) -> None:
        """Rows in ``INSERT_CALL`` column order."""
        self.executemany(INSERT_CALL, rows)
