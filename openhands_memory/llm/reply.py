"""What a call brought back, as the library's records: an :class:`LLMReply` from what
litellm returned, an :class:`LLMError` from what it raised."""

from __future__ import annotations

import json
import math
import time
from typing import Any

from .config import LLMConfig
from .errors import ContextWindowError, LLMError, connect_failure, connect_target, status_code
from .loader import load_litellm
from .records import LLMCall, LLMReply, ToolCall

# A reply longer than this (text and tool-call arguments together) is a bad response, never
# a summary: 200,000 characters is about 50,000 tokens, far beyond any summary we ask for.
MAX_REPLY_CHARS = 200_000
_MAX_ERROR_CHARS = 2000


def _describe(exc: BaseException, config: LLMConfig) -> str:
    text = f"{type(exc).__name__}: {exc}"
    key = config.api_key_value()
    if key:
        text = text.replace(key, "***")  # providers sometimes echo credentials
    if len(text) > _MAX_ERROR_CHARS:
        text = text[: _MAX_ERROR_CHARS - 3] + "..."
    return text


def _cost(response: Any) -> float | None:
    """USD cost when litellm's price map knows the model; None otherwise (never raises)."""
    try:
        cost = load_litellm().completion_cost(completion_response=response)
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


def build_reply(config: LLMConfig, response: Any, started: float, attempts: int) -> LLMReply:
    """Turn a litellm ModelResponse into an LLMReply; raises LLMError(bad_response) if unusable."""
    response_id = getattr(response, "id", None)
    prompt_tokens, completion_tokens = _usage(response)
    choices = getattr(response, "choices", None) or []
    def refuse(error: str, message: str) -> LLMError:
        call = LLMCall(
            model=config.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=_cost(response),
            latency_s=time.perf_counter() - started,
            outcome="bad_response",
            error=error,
            response_id=response_id,
            attempts=attempts,
        )
        return LLMError(f"{config.model}: {message or 'bad_response: ' + error}", call=call, kind="bad_response")

    if not choices or getattr(choices[0], "message", None) is None:
        raise refuse("the response carried no choices/message", "response without a message")
    choice = choices[0]
    size = len(_message_text(choice.message) or "") + sum(len(t.arguments) for t in _tool_calls(choice.message))
    if size > MAX_REPLY_CHARS:
        raise refuse(f"the reply holds {size:,} characters, more than the {MAX_REPLY_CHARS:,} allowed", "")
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


def failure(
    config: LLMConfig, exc: BaseException, kind: str, started: float, attempts: int
) -> LLMError:
    tries = "attempt" if attempts == 1 else "attempts"
    refused = connect_failure(exc) if kind == "connection_error" else None
    if refused is not None:  # no HTTP exchange: no status, and say where it tried
        target = connect_target(refused, config.api_base)
        error = f"could not connect to {target}: {refused}"
    else:
        target, error = None, _describe(exc, config)
    call = LLMCall(
        model=config.model,
        prompt_tokens=None,
        completion_tokens=None,
        cost_usd=None,
        latency_s=time.perf_counter() - started,
        outcome=kind,
        error=error,
        attempts=attempts,
    )
    error_cls = ContextWindowError if kind == "context_window" else LLMError
    message = f"{config.model}: {kind} after {attempts} {tries}: {call.error}"
    return error_cls(message, call=call, kind=kind, status=None if target else status_code(exc), target=target)
