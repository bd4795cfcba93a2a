"""The web inspector: ``create_app(location)`` is a read-only ASGI app over a database
(``openhands-memory serve`` runs it with uvicorn). Starlette loads on first use."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.applications import Starlette


def create_app(location: str | Path, *, statement_timeout: float = 10.0) -> "Starlette":
    """The inspector over the SQLite file or PostgreSQL URL ``location``, read-only: mount
    it in another ASGI app, or serve it with any ASGI server."""
    from .app import create_app as build

    return build(location, statement_timeout=statement_timeout)


__all__ = ["create_app"]
