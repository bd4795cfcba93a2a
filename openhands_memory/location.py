"""Where a database lives: a file path or a server URL, how messages name it (never with its
password), and what libpq is given beside a URL (the connect timeout and TCP keepalives).

Its own module so that everything that opens, judges or migrates a database (``database``,
``migrate``, the alembic environment) can name a location without importing the others.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Location:
    """Where a database lives: a SQLAlchemy URL, and the file path when it is SQLite."""

    url: str
    path: Path | None

    @property
    def label(self) -> str:
        """How messages name the database: the path, or the URL without its password (a
        message may reach a terminal, a CI log or a bug report)."""
        return str(self.path) if self.path is not None else without_password(self.url)

    @classmethod
    def parse(cls, path_or_url: str | Path) -> "Location":
        text = str(path_or_url)
        if "://" not in text:
            path = Path(text).expanduser()
            return cls(f"sqlite:///{path}", path)
        if text.startswith("sqlite:///") and text != "sqlite:///:memory:":
            return cls(text, Path(text.removeprefix("sqlite:///")))
        return cls(text, None)

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")

    @property
    def is_postgres(self) -> bool:
        return self.url.split("://", 1)[0].split("+")[0] in ("postgresql", "postgres")

    @property
    def sqlalchemy_url(self) -> str:
        """The URL for SQLAlchemy: PostgreSQL through psycopg 3."""
        if self.is_postgres:
            return "postgresql+psycopg://" + self.url.split("://", 1)[1]
        return self.url

    @property
    def connect_args(self) -> dict[str, Any]:
        """What the driver is given beside the URL (PostgreSQL: ``connection_params``, and no
        prepared statements: a pooler in transaction mode hands the server's session, where
        they live, to other clients)."""
        if not self.is_postgres:
            return {}
        return {**connection_params(self.driver_url), "prepare_threshold": None}

    @property
    def driver_url(self) -> str:
        """The URL as the driver itself (psycopg) takes it: no SQLAlchemy dialect suffix."""
        scheme, rest = self.url.split("://", 1)
        return f"{scheme.split('+')[0]}://{rest}"


def without_password(url: str) -> str:
    """``url`` with any password shown as ``***``: ``postgresql://u:***@h/db``, and the
    ``password`` parameter libpq also reads (``?password=...``)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, slash, tail = rest.partition("/")
    userinfo, at, host = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = f"{userinfo.split(':', 1)[0]}:***@{host}"
    tail = re.sub(r"([?&]password=)[^&]*", r"\1***", tail)
    return f"{scheme}://{netloc}{slash}{tail}"


#: libpq's connect_timeout when neither the URL nor PGCONNECT_TIMEOUT sets one. It bounds the
#: connection and its start-up: a host that accepts the connection and never answers would
#: otherwise hold a command for minutes (psycopg's own default is 130 s per address).
CONNECT_TIMEOUT = 10
#: TCP keepalives, where the URL sets none: after 30 s of silence a probe every 10 s, and
#: the connection ends after 3 unanswered ones. A server host that vanished without closing
#: the connection (a crash, a network cut) is then noticed within about a minute, not the
#: OS's two hours; a server at work on a long statement answers the probes, so it is left
#: alone. (Unix sockets have no keepalives; libpq ignores them there.)
KEEPALIVES = {"keepalives": "1", "keepalives_idle": "30", "keepalives_interval": "10",
              "keepalives_count": "3"}


def connection_params(url: str) -> dict[str, str]:
    """What libpq is given beside the URL: the connect timeout and the keepalives, each only
    where the URL (or, for the timeout, ``PGCONNECT_TIMEOUT``) does not set its own."""
    given: set[str] = set()
    if "connect_timeout" in url or "keepalives" in url:  # (parsing costs ~0.1 ms: only then)
        try:
            from psycopg.conninfo import conninfo_to_dict

            given = set(conninfo_to_dict(url))
        except Exception:  # noqa: BLE001  a URL libpq cannot parse: connecting says why
            pass
    params = {k: v for k, v in KEEPALIVES.items() if k not in given}
    if "connect_timeout" not in given and not os.environ.get("PGCONNECT_TIMEOUT"):
        params["connect_timeout"] = str(CONNECT_TIMEOUT)
    return params


def connect_timeout_of(url: str) -> float:
    """The connect timeout in force for ``url``, as psycopg applies it (per address tried):
    the URL's, else ``PGCONNECT_TIMEOUT``, else ours; at least 2 s."""
    value: object = None
    try:
        from psycopg.conninfo import conninfo_to_dict

        value = conninfo_to_dict(url).get("connect_timeout")
    except Exception:  # noqa: BLE001
        pass
    try:
        seconds = float(str(value if value is not None else os.environ.get("PGCONNECT_TIMEOUT") or CONNECT_TIMEOUT))
    except ValueError:
        seconds = CONNECT_TIMEOUT
    return max(2, int(seconds)) if seconds > 0 else 130
