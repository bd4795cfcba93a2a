"""The one module that talks to litellm: configuration, completion with retries, token counts.

``import litellm`` costs about two seconds and 160 MB, so it happens lazily the first
time a function here needs it; importing this module stays cheap.

Every call produces an :class:`LLMCall` record (model, tokens, cost, latency, outcome,
attempts) whether it succeeds (inside :class:`LLMReply`) or fails (on :class:`LLMError`),
so callers can persist what each summarisation cost.

Outcome vocabulary (``LLMCall.outcome`` and ``LLMError.kind``):

``ok``             the provider answered with a parseable completion.
``rate_limited``   HTTP 429; retried.
``server_error``   HTTP 5xx, service unavailable, connection failures; retried.
``timeout``        no complete answer within ``LLMConfig.timeout`` seconds; retried. The
                   timeout is a deadline for the whole attempt (connecting, sending,
                   and reading the reply to its last byte), not a limit between two
                   bytes: a server that drips its reply cannot hold a call longer.
``context_window`` the prompt does not fit the model; never retried (shrink it instead).
``bad_response``   HTTP 200 whose body is not a usable completion (not JSON, no choices,
                   a reply longer than ``MAX_REPLY_CHARS``);
                   not retried: it usually means ``api_base`` points at something that
                   is not an OpenAI-compatible endpoint, and repeating will not help.
``error``          anything else (auth failures, other 4xx, bad arguments); not retried.
"""

from __future__ import annotations

import dataclasses
import difflib
import email.utils
import json
import logging
import math
import os
import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, Field, model_validator

from .errors import ConfigError, OpenHandsMemoryError
from .settings import InvalidSetting, SettingError, settings

if TYPE_CHECKING:  # pragma: no cover - typing only; never imported at runtime here
    from types import ModuleType

__all__ = [
    "OUTCOMES",
    "ContextWindowError",
    "LLMCall",
    "LLMConfig",
    "LLMError",
    "LLMReply",
    "MAX_REPLY_CHARS",
    "TokenizerUnavailable",
    "ToolCall",
    "classify_error",
    "complete",
    "context_window",
    "count_tokens",
    "effective_max_input_tokens",
]

log = logging.getLogger(__name__)

OUTCOMES = (
    "ok", "rate_limited", "server_error", "timeout", "context_window", "bad_response", "error"
)
_RETRYABLE = frozenset({"rate_limited", "server_error", "timeout"})
_MAX_ERROR_CHARS = 2000
# A reply longer than this (text and tool-call arguments together) is a bad response, never
# a summary: 200,000 characters is about 50,000 tokens, far beyond any summary we ask for.
MAX_REPLY_CHARS = 200_000


class DeadlineExceeded(TimeoutError):
    """The attempt did not finish within ``LLMConfig.timeout`` seconds."""


# --------------------------------------------------------------------------- errors


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


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class LLMCall:
    """What one logical call cost. Token counts are None when the provider did not report them."""

    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    latency_s: float
    outcome: str
    error: str | None = None
    response_id: str | None = None
    attempts: int = 1

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ToolCall:
    """One function call requested by the model; ``arguments`` is the raw JSON string."""

    name: str
    arguments: str
    id: str | None = None

    def parsed_arguments(self) -> Any:
        """Decode ``arguments``; raises ``ValueError`` when the model produced invalid JSON."""
        return json.loads(self.arguments) if self.arguments else {}


@dataclass(frozen=True)
class LLMReply:
    """A successful completion. ``text`` may be None or "" (callers decide if that is fine)."""

    text: str | None
    tool_calls: list[ToolCall]
    response_id: str | None
    call: LLMCall
    finish_reason: str | None = None


# --------------------------------------------------------------------------- config

# Keys an OpenHands ``[llm.NAME]`` table may carry that do not affect this library.
# They are accepted so an existing OpenHands config.toml loads unchanged.
_IGNORED_OPENHANDS_KEYS = frozenset(
    {
        "api_version",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_region_name",
        "openrouter_site_url",
        "openrouter_app_name",
        "retry_multiplier",
        "max_message_chars",
        "top_p",
        "top_k",
        "input_cost_per_token",
        "output_cost_per_token",
        "ollama_base_url",
        "drop_params",
        "modify_params",
        "disable_vision",
        "disable_stop_word",
        "caching_prompt",
        "log_completions",
        "log_completions_folder",
        "custom_tokenizer",
        "native_tool_calling",
        "reasoning_effort",
        "seed",
        "safety_settings",
        "for_routing",
        "correct_num",
        "completion_kwargs",
        "embedding_model",
        "embedding_base_url",
        "embedding_deployment_name",
        "usage_id",
        "service_id",
        "stream",
        "extended_thinking_budget",
    }
)

_ENV_FALLBACKS = {
    "model": ("OPENHANDS_MEMORY_LLM_MODEL", "LLM_MODEL"),
    "api_base": ("OPENHANDS_MEMORY_LLM_API_BASE", "LLM_BASE_URL"),
    "api_key": ("OPENHANDS_MEMORY_LLM_API_KEY", "LLM_API_KEY"),
}


def _model_name(value: str) -> str:
    if not value.strip():
        raise ValueError("must be a non-empty model name such as 'openai/gpt-4o'")
    return value


# `api_key = ""` in a TOML file means "not set".
OptionalText = Annotated[str | None, AfterValidator(lambda value: value or None)]


@settings("LLMConfig", subject="LLMConfig", frozen=True, repr=False)
class LLMConfig:
    """How to reach one model. Times are in seconds."""

    model: Annotated[str, AfterValidator(_model_name)]
    api_base: OptionalText = None
    api_key: OptionalText = None
    timeout: Annotated[float, Field(gt=0)] = 60.0
    num_retries: Annotated[int, Field(ge=0)] = 3
    retry_min_wait: Annotated[float, Field(ge=0)] = 1.0
    retry_max_wait: Annotated[float, Field(ge=0)] = 20.0
    temperature: Annotated[float, Field(ge=0)] | None = None
    max_output_tokens: Annotated[int, Field(ge=1)] | None = None
    custom_llm_provider: OptionalText = None
    max_input_tokens: Annotated[int, Field(ge=1)] | None = None

    @model_validator(mode="after")
    def _waits_in_order(self) -> LLMConfig:
        if self.retry_min_wait > self.retry_max_wait:
            raise SettingError(
                "retry_min_wait",
                f"({self.retry_min_wait:g}) must not exceed retry_max_wait ({self.retry_max_wait:g})",
            )
        return self

    def __repr__(self) -> str:
        # The key must never reach logs, tracebacks or the database, so repr masks it.
        parts = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "api_key" and value is not None:
                parts.append("api_key='***'")
            else:
                parts.append(f"{f.name}={value!r}")
        return f"LLMConfig({', '.join(parts)})"

    __str__ = __repr__

    @classmethod
    def from_mapping(cls, name: str, data: Mapping[str, Any], *, where: str | None = None) -> LLMConfig:
        """Build from an OpenHands-style ``[llm.NAME]`` TOML table (or one at ``where``,
        such as an inline ``condenser.llm_config``).

        Settings OpenHands knows but this library does not use are ignored; any other key
        is almost certainly a typo and raises ``ConfigError`` naming ``llm.NAME.key``.
        """
        prefix = where or f"llm.{name}"
        if not isinstance(data, Mapping):
            raise ConfigError(f"{prefix} must be a table, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        spelled: dict[str, str] = {}  # setting -> the key the table used for it
        for key, value in data.items():
            target = "api_base" if key == "base_url" else key
            if target in known:
                if target in values and values[target] != value:
                    raise ConfigError(
                        f"{prefix}.{key}: both base_url and api_base are set and differ; keep one"
                    )
                values[target], spelled[target] = value, key
            elif key not in _IGNORED_OPENHANDS_KEYS:
                raise ConfigError(_unknown_key_message(prefix, key, known))
        if "model" not in values:
            raise ConfigError(f"{prefix}.model is required (for example model = \"openai/gpt-4o\")")
        try:
            return cls(**values)
        except InvalidSetting as e:
            raise e.at(prefix, spelled.get(e.key)) from None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LLMConfig | None:
        """Read ``OPENHANDS_MEMORY_LLM_*`` (falling back to ``LLM_*``); None if no model is set."""
        env = os.environ if environ is None else environ
        values: dict[str, str] = {}
        for key, names in _ENV_FALLBACKS.items():
            for env_name in names:
                if env.get(env_name):
                    values[key] = env[env_name]
                    break
        if "model" not in values:
            return None
        return cls(**values)


def _unknown_key_message(prefix: str, key: str, known: set[str]) -> str:
    candidates = sorted(known | {"base_url"} | _IGNORED_OPENHANDS_KEYS)
    close = difflib.get_close_matches(str(key), candidates, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{prefix}.{key} is not a known LLM setting{hint}"


def effective_max_input_tokens(config: LLMConfig) -> int | None:
    """The configured input limit, else the model's known context window, else None."""
    if config.max_input_tokens is not None:
        return config.max_input_tokens
    return context_window(config.model)


# --------------------------------------------------------------------------- litellm loading

_litellm_module: ModuleType | None = None
_litellm_lock = threading.Lock()


def _litellm() -> ModuleType:
    """Import litellm once, configured for offline, quiet use."""
    global _litellm_module
    if _litellm_module is not None:
        return _litellm_module
    with _litellm_lock:
        if _litellm_module is None:
            # Without this litellm fetches its price map over the network at import time
            # (there is none here: warnings plus seconds of retries).
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm

            litellm.telemetry = False
            litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banners
            litellm.set_verbose = False
            for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
                logger = logging.getLogger(name)
                if logger.level < logging.WARNING:
                    logger.setLevel(logging.WARNING)
            _litellm_module = litellm
    return _litellm_module


# --------------------------------------------------------------------------- error classification

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


def _status_code(exc: BaseException) -> int | None:
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
    litellm = _litellm()
    if isinstance(exc, litellm.ContextWindowExceededError):
        return "context_window"
    # litellm.Timeout derives from openai's APIConnectionError: test it before server errors.
    if isinstance(exc, (litellm.Timeout, TimeoutError)):
        return "timeout"
    status = _status_code(exc)
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


# --------------------------------------------------------------------------- retry timing


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
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


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


def _retry_delay(config: LLMConfig, retry_number: int, exc: BaseException) -> float:
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


# --------------------------------------------------------------------------- completion


def _without_key(mapping: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if k != key}


def _strip_cache_control(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copy messages without ``cache_control`` markers: prompt caching stays off."""
    cleaned: list[dict[str, Any]] = []
    for message in messages:
        copy = _without_key(message, "cache_control")
        content = copy.get("content")
        if isinstance(content, list):
            copy["content"] = [
                _without_key(part, "cache_control") if isinstance(part, dict) else part
                for part in content
            ]
        cleaned.append(copy)
    return cleaned


def _request_kwargs(
    config: LLMConfig,
    messages: Sequence[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    tool_choice: Any,
    response_format: Any,
) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "model": config.model,
        "messages": _strip_cache_control(messages),
        "api_base": config.api_base,
        "api_key": config.api_key,
        "timeout": config.timeout,
        "temperature": config.temperature,
        "max_tokens": config.max_output_tokens,
        "tools": tools,
        "tool_choice": tool_choice,
        "response_format": response_format,
        # Retries are ours (so attempts and latency are measured); litellm's and the
        # openai client's own retry loops must stay off.
        "num_retries": 0,
        "max_retries": 0,
        "stream": False,
        "caching": False,
    }
    if config.custom_llm_provider:
        kwargs["custom_llm_provider"] = config.custom_llm_provider
    if tools:
        # litellm 1.106 imports its MCP-gateway code whenever tools are passed, and that
        # code needs the optional `mcp` package; our tools are plain functions, never
        # MCP-gateway tools, so tell litellm to skip that check (the flag is popped
        # before the request is built and never reaches the provider).
        kwargs["_skip_mcp_handler"] = True
    return kwargs


def _describe(exc: BaseException, config: LLMConfig) -> str:
    text = f"{type(exc).__name__}: {exc}"
    if config.api_key:
        text = text.replace(config.api_key, "***")  # providers sometimes echo credentials
    if len(text) > _MAX_ERROR_CHARS:
        text = text[: _MAX_ERROR_CHARS - 3] + "..."
    return text


def _cost(response: Any) -> float | None:
    """USD cost when litellm's price map knows the model; None otherwise (never raises)."""
    try:
        cost = _litellm().completion_cost(completion_response=response)
    except Exception:  # noqa: BLE001 - an unpriced model is normal, not an error
        return None
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or not math.isfinite(cost):
        return None
    return float(cost)


def _usage(response: Any) -> tuple[int | None, int | None]:
    usage = getattr(response, "usage", None)
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    return (
        prompt if isinstance(prompt, int) else None,
        completion if isinstance(completion, int) else None,
    )


def _tool_calls(message: Any) -> list[ToolCall]:
    calls = []
    for raw in getattr(message, "tool_calls", None) or []:
        function = getattr(raw, "function", None)
        name = getattr(function, "name", None) or ""
        arguments = getattr(function, "arguments", None)
        if not isinstance(arguments, str):  # some providers hand back a dict
            arguments = json.dumps(arguments) if arguments is not None else ""
        calls.append(ToolCall(name=name, arguments=arguments, id=getattr(raw, "id", None)))
    return calls


def _message_text(message: Any) -> str | None:
    content = getattr(message, "content", None)
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def _build_reply(config: LLMConfig, response: Any, started: float, attempts: int) -> LLMReply:
    """Turn a litellm ModelResponse into an LLMReply; raises LLMError(bad_response) if unusable."""
    response_id = getattr(response, "id", None)
    prompt_tokens, completion_tokens = _usage(response)
    choices = getattr(response, "choices", None) or []
    if not choices or getattr(choices[0], "message", None) is None:
        call = LLMCall(
            model=config.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=_cost(response),
            latency_s=time.perf_counter() - started,
            outcome="bad_response",
            error="the response carried no choices/message",
            response_id=response_id,
            attempts=attempts,
        )
        raise LLMError(f"{config.model}: response without a message", call=call, kind="bad_response")
    choice = choices[0]
    size = len(_message_text(choice.message) or "") + sum(len(t.arguments) for t in _tool_calls(choice.message))
    if size > MAX_REPLY_CHARS:
        call = LLMCall(
            model=config.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=_cost(response),
            latency_s=time.perf_counter() - started,
            outcome="bad_response",
            error=f"the reply holds {size:,} characters, more than the {MAX_REPLY_CHARS:,} allowed",
            response_id=response_id,
            attempts=attempts,
        )
        raise LLMError(f"{config.model}: bad_response: {call.error}", call=call, kind="bad_response")
    latency = time.perf_counter() - started  # before the price lookup, which is ours
    call = LLMCall(
        model=config.model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost_usd=_cost(response),
        latency_s=latency,
        outcome="ok",
        response_id=response_id,
        attempts=attempts,
    )
    return LLMReply(
        text=_message_text(choice.message),
        tool_calls=_tool_calls(choice.message),
        response_id=response_id,
        call=call,
        finish_reason=getattr(choice, "finish_reason", None),
    )


def _failure(
    config: LLMConfig, exc: BaseException, kind: str, started: float, attempts: int
) -> LLMError:
    call = LLMCall(
        model=config.model,
        prompt_tokens=None,
        completion_tokens=None,
        cost_usd=None,
        latency_s=time.perf_counter() - started,
        outcome=kind,
        error=_describe(exc, config),
        attempts=attempts,
    )
    error_cls = ContextWindowError if kind == "context_window" else LLMError
    tries = "attempt" if attempts == 1 else "attempts"
    message = f"{config.model}: {kind} after {attempts} {tries}: {call.error}"
    return error_cls(message, call=call, kind=kind, status=_status_code(exc))


def _within_deadline(call: Any, seconds: float) -> Any:
    """``call()``, or ``DeadlineExceeded`` once ``seconds`` have passed, whatever it is doing.

    The HTTP client's own timeout (also set) bounds each read, so a server sending a byte
    every few seconds would never trip it. The call runs in a daemon thread; when the
    deadline passes it is abandoned (its socket times out or closes later) and the caller
    goes on at once. Ctrl-C interrupts the wait.
    """
    outcome: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            outcome.append((False, exc))
        finally:
            done.set()

    worker = threading.Thread(target=run, name="openhands-memory-llm-call", daemon=True)
    worker.start()
    if not done.wait(seconds):
        raise DeadlineExceeded(f"no complete reply within {seconds:g} s")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def complete(
    config: LLMConfig,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: Any = None,
    response_format: Any = None,
) -> LLMReply:
    """One chat completion with our own retry loop.

    Retries rate limits, server errors and timeouts up to ``config.num_retries`` times;
    context-window overflows, auth failures, other 4xx and unusable bodies fail at once.
    ``latency_s`` covers the whole call including backoff sleeps.
    Raises ``ContextWindowError`` / ``LLMError`` carrying the ``LLMCall``.
    """
    litellm = _litellm()
    kwargs = _request_kwargs(config, messages, tools, tool_choice, response_format)
    started = time.perf_counter()
    attempts = 0
    while True:
        attempts += 1
        try:
            response = _within_deadline(lambda: litellm.completion(**kwargs), config.timeout)
        except Exception as exc:  # noqa: BLE001 - classified below, re-raised as LLMError
            kind = classify_error(exc)
            if kind in _RETRYABLE and attempts <= config.num_retries:
                delay = _retry_delay(config, attempts, exc)
                log.info(
                    "%s: %s on attempt %d; retrying in %.2fs", config.model, kind, attempts, delay
                )
                time.sleep(delay)
                continue
            raise _failure(config, exc, kind, started, attempts) from exc
        return _build_reply(config, response, started, attempts)


# --------------------------------------------------------------------------- tokens & windows


def count_tokens(
    model: str,
    text_or_messages: str | Sequence[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
) -> int:
    """Tokens in a string or a list of chat messages, per litellm's tokenizer for ``model``.

    Raises ``TokenizerUnavailable`` on failure: a silent 0 would disable token triggers.
    """
    litellm = _litellm()
    try:
        if isinstance(text_or_messages, str):
            count = litellm.token_counter(model=model, text=text_or_messages)
        else:
            count = litellm.token_counter(model=model, messages=list(text_or_messages), tools=tools)
    except Exception as exc:  # noqa: BLE001 - re-raised with a clear type
        raise TokenizerUnavailable(model, f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise TokenizerUnavailable(model, f"tokenizer returned {count!r}")
    return count


def context_window(model: str) -> int | None:
    """The model's input-token limit from litellm's model map; None when unknown (never raises)."""
    try:
        info = _litellm().get_model_info(model)
        value = info.get("max_input_tokens") if isinstance(info, Mapping) else None
    except Exception:  # noqa: BLE001 - unmapped models are common (local, proxied)
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None
