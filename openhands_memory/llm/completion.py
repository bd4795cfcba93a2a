"""One chat completion: the request, a deadline for each attempt, and the retry loop."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from .cache import active_cache, request_key
from .config import LLMConfig
from .errors import DeadlineExceeded, classify_error
from .loader import load_litellm, loaded
from .reach import check
from .records import LLMReply
from .reply import build_reply, failure
from .retry import RETRYABLE, retry_delay

log = logging.getLogger(__name__)


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
        "api_key": config.api_key_value(),
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
    kwargs = _request_kwargs(config, messages, tools, tool_choice, response_format)
    cache = active_cache()
    if cache is not None:
        key = request_key(config, kwargs)
        kept = cache.lookup(key)
        if kept is not None:
            return kept
        cache.admit(config.model)
    started = time.perf_counter()
    attempts = 0
    while True:
        attempts += 1
        try:
            if not loaded():  # a server that is not there is told without importing litellm
                check(config.api_base, config.timeout)
                importing = time.perf_counter()
                load_litellm()
                started += time.perf_counter() - importing  # the import is no part of the call
            litellm = load_litellm()
            response = _within_deadline(lambda: litellm.completion(**kwargs), config.timeout)
        except Exception as exc:
            kind = classify_error(exc)
            if kind in RETRYABLE and attempts <= config.num_retries:
                delay = retry_delay(config, attempts, exc)
                log.info(
                    "%s: %s on attempt %d; retrying in %.2fs", config.model, kind, attempts, delay
                )
                time.sleep(delay)
                continue
            error = failure(config, exc, kind, started, attempts)
            if cache is not None:
                cache.failed(error.call)
            raise error from exc
        reply = build_reply(config, response, started, attempts)
        if cache is not None:
            cache.record(key, config, reply)
        return reply
