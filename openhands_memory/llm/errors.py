"""How a model call fails: the errors it raises, and which kind each provider failure is."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ..errors import OpenHandsMemoryError
from .loader import load_litellm

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .records import LLMCall


class DeadlineExceeded(TimeoutError):
    """The attempt did not finish within ``LLMConfig.timeout`` seconds."""


class NotConnected(ConnectionError):
    """No connection could be made to the model's server (refused, unreachable, a name that
    does not resolve), found before litellm was imported (``reach.py``)."""


class LLMError(OpenHandsMemoryError):
    """A model call failed for good (after any retries). ``call`` records what it cost."""

    def __init__(self, message: str, *, call: LLMCall, kind: str, status: int | None = None,
                 target: str | None = None) -> None:
        super().__init__(message)
        self.call = call
        self.kind = kind
        self.status = status
        self.target = target  # connection_error: the address no connection could be made to

    @property
    def brief(self) -> str:
        """A short account for one line of output: ``gpt-4o: server_error (HTTP 500) after
        4 attempts``, ``gpt-4o: connection_error (could not connect to http://127.0.0.1:9)
        after 1 attempt``; the full text is in ``str(self)`` and in the ledger."""
        status = f" (HTTP {self.status})" if self.status else ""
        if self.target:
            status = f" (could not connect to {self.target})"
        tries = "attempt" if self.call.attempts == 1 else "attempts"
        return f"{self.call.model}: {self.kind}{status} after {self.call.attempts} {tries}"


class ContextWindowError(LLMError):
    """The prompt is larger than the model accepts. Retrying the same prompt cannot help."""


class TokenizerUnavailable(OpenHandsMemoryError):
    """Tokens could not be counted for this model; raised instead of silently returning 0."""

    def __init__(self, model: str, reason: str) -> None:
        super().__init__(f"cannot count tokens for model {model!r}: {reason}")
        self.model = model


# Lower-case fragments that providers use when the prompt is too long. litellm maps
# many of these to ContextWindowExceededError already; the list catches the rest
# (proxies and self-hosted servers that answer with a plain 400).
_CONTEXT_WINDOW_PHRASES = (
    "contextwindowexceedederror",
    "context_length_exceeded",
    "context length exceeded",
    "maximum context length",
    "prompt is too long",
    "input is too long",
    "reduce the length of",
    "exceeds the context window",
    "exceed context limit",
    "exceeds the available context size",
    "context window exceeds limit",
    "too many tokens in the prompt",
)


def status_code(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    return code if isinstance(code, int) else None


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes, outermost first (litellm wraps the transport's error)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def connect_failure(exc: BaseException) -> BaseException | None:
    """The transport's error on ``exc``'s chain saying that no connection was made (refused,
    unreachable, a name that does not resolve), or None. litellm reports it as an
    InternalServerError with status 500, though no HTTP exchange happened."""
    ours = next((e for e in _chain(exc) if isinstance(e, NotConnected)), None)
    if ours is not None:
        return ours
    try:
        import httpx  # litellm's (and openai's) transport
    except ImportError:  # pragma: no cover - litellm depends on it
        return None
    return next((e for e in _chain(exc) if isinstance(e, httpx.ConnectError)), None)


def connect_target(exc: BaseException, api_base: str | None) -> str:
    """Where a connection was tried: the configured ``api_base``, else the request's origin."""
    if api_base:
        return api_base
    try:
        url = exc.request.url  # type: ignore[attr-defined]
        return f"{url.scheme}://{url.host}" + (f":{url.port}" if url.port else "")
    except (AttributeError, RuntimeError):  # httpx raises RuntimeError for an unset request
        return "the provider's endpoint"


def _caused_by_bad_json(exc: BaseException) -> bool:
    # litellm reports an unparseable 200 body as InternalServerError(500); the real
    # cause, a JSONDecodeError, is still on the exception chain.
    return any(isinstance(e, json.JSONDecodeError) for e in _chain(exc))


def classify_error(exc: BaseException) -> str:
    """Map an exception raised by ``litellm.completion`` to an outcome kind."""
    # Ours, raised before litellm is imported: no need to import it to say what they are.
    if isinstance(exc, NotConnected):
        return "connection_error"
    if isinstance(exc, DeadlineExceeded):
        return "timeout"
    litellm = load_litellm()
    if isinstance(exc, litellm.ContextWindowExceededError):
        return "context_window"
    # litellm.Timeout derives from openai's APIConnectionError: test it before server errors.
    if isinstance(exc, (litellm.Timeout, TimeoutError)):
        return "timeout"
    if connect_failure(exc) is not None:
        return "connection_error"
    status = status_code(exc)
    if isinstance(exc, litellm.RateLimitError) or status == 429:
        return "rate_limited"
    # Proxies and self-hosted servers often report an overflow as a plain 400 (or even
    # a 500); the wording is the only signal, and retrying such a call is pointless.
    message = str(exc).lower()
    if any(phrase in message for phrase in _CONTEXT_WINDOW_PHRASES):
        return "context_window"
    if _caused_by_bad_json(exc) or isinstance(exc, litellm.APIResponseValidationError):
        return "bad_response"
    if isinstance(
        exc,
        (
            litellm.InternalServerError,
            litellm.ServiceUnavailableError,
            litellm.BadGatewayError,
            litellm.APIConnectionError,
        ),
    ) or (status is not None and status >= 500):
        return "server_error"
    return "error"
