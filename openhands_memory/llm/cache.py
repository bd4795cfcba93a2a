"""Replies reused by request: a second replay of the same history calls no model.

While a :class:`ReplyCache` is active (``with cache.active():``), :func:`~.completion.complete`
looks each request up by a hash of what it sends (model, messages, tools and their choice,
response format, temperature and output limit) before calling the model, and keeps every
successful reply under it. Where replies are kept is the caller's: a replay keeps them in its
scratch database (``llm_reply``, revision 0009), through the two functions it hands in.

A reply taken from the cache is marked ``cached``: it was no call, so the ledger records none.
The cache also holds the spending limit of the calls it lets through (``max_cost``): the call
that would start past it raises :class:`CostLimitReached` instead, which no condenser's
fallback catches, so a replay stops rather than summarize some other way.
"""

from __future__ import annotations

import contextvars
import dataclasses
import hashlib
import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

from ..errors import OpenHandsMemoryError
from .config import LLMConfig
from .records import LLMCall, LLMReply, ToolCall

_ACTIVE: contextvars.ContextVar["ReplyCache | None"] = contextvars.ContextVar("ohm_reply_cache", default=None)


class CostLimitReached(OpenHandsMemoryError):
    """The model calls made under a spending limit reached it."""


def request_key(config: LLMConfig, request: dict[str, Any]) -> str:
    """The hash a request is kept under: what decides the reply, never the credentials."""
    shown = {k: request.get(k) for k in ("messages", "tools", "tool_choice", "response_format")}
    shown.update(model=config.model, temperature=config.temperature, max_output_tokens=config.max_output_tokens)
    text = json.dumps(shown, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _to_json(reply: LLMReply) -> str:
    return json.dumps(dataclasses.asdict(reply), sort_keys=True)


def _from_json(text: str) -> LLMReply:
    data = json.loads(text)
    call = LLMCall(**data["call"])
    return LLMReply(
        text=data["text"], tool_calls=[ToolCall(**t) for t in data["tool_calls"]],
        response_id=data["response_id"], call=call, finish_reason=data.get("finish_reason"), cached=True,
    )


@dataclass
class ReplyCache:
    """Replies kept through ``load(key) -> JSON | None`` and ``keep(key, model, JSON, when)``;
    ``max_cost``: USD the calls let through may spend (None: no limit)."""

    load: Callable[[str], str | None]
    keep: Callable[[str, str, str, str], None]
    max_cost: float | None = None
    hits: int = 0
    calls: int = 0
    spent: float = 0.0
    unpriced: int = field(default=0)  # calls whose cost the provider did not report

    @contextmanager
    def active(self) -> Iterator["ReplyCache"]:
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)

    def lookup(self, key: str) -> LLMReply | None:
        text = self.load(key)
        if text is None:
            return None
        self.hits += 1
        return _from_json(text)

    def admit(self, model: str) -> None:
        """Before a call: refuse it once the limit is spent."""
        if self.max_cost is not None and self.spent >= self.max_cost:
            raise CostLimitReached(
                f"{model}: the model calls reached the spending limit (${self.spent:.4f} of ${self.max_cost:.4f}) "
                f"after {self.calls} call(s); raise --max-cost to go on (kept replies are reused)")

    def record(self, key: str, config: LLMConfig, reply: LLMReply) -> None:
        self.calls += 1
        if reply.call.cost_usd is None:
            self.unpriced += 1
        else:
            self.spent += reply.call.cost_usd
        self.keep(key, config.model, _to_json(reply), datetime.now(timezone.utc).isoformat())

    def failed(self, call: LLMCall) -> None:
        """A failed call is spent too (a provider may bill a call that timed out)."""
        self.calls += 1
        self.spent += call.cost_usd or 0.0


def active_cache() -> ReplyCache | None:
    return _ACTIVE.get()
