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


class LLMError(OpenHandsMemoryError):
    """A model call failed for good (after any retries). ``call`` records what it cost."""

    def __init__(self, message: str, *, call: LLMCall, kind: str, status: int | None = None) -> None:
        super().__init__(message)
        self.call = call
        self.kind = kind
        self.status = status

    @property
    def brief(self) -> str:
        """A short account for one line of output: ``gpt-4o: server_error (HTTP 500) after
        4 attempts``; the full text is in ``str(self)`` and in the ledger."""
        status = f" (HTTP {self.status})" if self.status else ""
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


def _caused_by_bad_json(exc: BaseException) -> bool:
    # litellm reports an unparseable 200 body as InternalServerError(500); the real
    # cause, a JSONDecodeError, is still on the exception chain.
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, json.JSONDecodeError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def classify_error(exc: BaseException) -> str:
    """Map an exception raised by ``litellm.completion`` to an outcome kind."""
    litellm = load_litellm()
    if isinstance(exc, litellm.ContextWindowExceededError):
        return "context_window"
    # litellm.Timeout derives from openai's APIConnectionError: test it before server errors.
    if isinstance(exc, (litellm.Timeout, TimeoutError)):
        return "timeout"
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
