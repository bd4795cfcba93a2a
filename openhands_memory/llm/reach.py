"""Whether a model's server takes connections, asked before litellm is imported.

Importing litellm takes seconds of CPU; a call to a server that is not listening would pay
them only to learn that the connection was refused. So while litellm is not loaded yet, a call
whose ``api_base`` names an http(s) server first opens one TCP connection to it (and closes
it). Refused, unreachable or a name that does not resolve ends the attempt at once as the
``connection_error`` litellm's attempt would have ended in; no connection within the
attempt's timeout ends it as a ``timeout``. An accepted connection goes on to litellm, as does
a call through a proxy (the environment's ``*_PROXY``), whose server is the proxy's to reach.
"""

from __future__ import annotations

import errno
import os
import socket
from urllib.parse import urlsplit

from .errors import DeadlineExceeded, NotConnected

_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
# What httpx reports as a ConnectError (no connection made) rather than a timeout.
_UNREACHABLE = frozenset({errno.ECONNREFUSED, errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EADDRNOTAVAIL})


def _address(api_base: str | None) -> tuple[str, int] | None:
    """(host, port) of an http(s) ``api_base``; None for anything else."""
    if not api_base:
        return None
    try:
        parts = urlsplit(api_base)
        port = parts.port
    except ValueError:  # a malformed URL: litellm's to report
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


def _proxied() -> bool:
    return any(os.environ.get(v) or os.environ.get(v.lower()) for v in _PROXY_VARIABLES)


def check(api_base: str | None, timeout: float) -> None:
    """Raise ``NotConnected`` when no connection to ``api_base`` can be made, or
    ``DeadlineExceeded`` when none is made within ``timeout`` seconds; return otherwise (a
    connection made, or nothing to check: no http(s) ``api_base``, or a proxy)."""
    address = _address(api_base)
    if address is None or _proxied():
        return
    try:
        socket.create_connection(address, timeout=timeout).close()
    except socket.timeout:
        raise DeadlineExceeded(f"no connection to {api_base} within {timeout:g} s") from None
    except socket.gaierror as exc:
        raise NotConnected(str(exc)) from None
    except OSError as exc:
        if exc.errno in _UNREACHABLE:
            raise NotConnected(str(exc)) from None
        # Anything else (say, a socket limit): litellm's attempt will say what it is.
