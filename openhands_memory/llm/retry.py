"""When a failed call is tried again, and how long to wait before it."""

from __future__ import annotations

import email.utils
import random
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .config import LLMConfig

RETRYABLE = frozenset({"rate_limited", "server_error", "connection_error", "timeout"})


def _parse_retry_after(value: str) -> float | None:
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:  # the HTTP-date form, e.g. "Wed, 21 Oct 2026 07:28:00 GMT"
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _retry_after_seconds(exc: BaseException) -> float | None:
    """The server's requested wait, if litellm kept the response headers."""
    # litellm copies the provider headers to `litellm_response_headers`; its
    # `exc.response` is often a synthetic response with no headers at all.
    sources = (
        getattr(exc, "litellm_response_headers", None),
        getattr(getattr(exc, "response", None), "headers", None),
    )
    for headers in sources:
        if not headers:
            continue
        try:
            millis = headers.get("retry-after-ms")
            if millis is not None:
                return max(0.0, float(millis) / 1000.0)
            value = headers.get("retry-after")
        except (AttributeError, TypeError, ValueError):
            continue
        if value is not None:
            parsed = _parse_retry_after(str(value))
            if parsed is not None:
                return parsed
    return None


def retry_delay(config: LLMConfig, retry_number: int, exc: BaseException) -> float:
    """Jittered exponential backoff in [retry_min_wait, retry_max_wait].

    A Retry-After from the server raises the wait (retrying earlier would be refused
    again), but never beyond retry_max_wait so a hostile header cannot stall us.
    """
    lo, hi = config.retry_min_wait, config.retry_max_wait
    ceiling = min(hi, lo * (2.0**retry_number))
    delay = random.uniform(lo, max(lo, ceiling))
    server_wait = _retry_after_seconds(exc)
    if server_wait is not None:
        delay = max(delay, server_wait)
    return min(delay, hi)
