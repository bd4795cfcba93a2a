"""What a model call leaves behind: its cost record, and the reply it brought."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

# ``LLMCall.outcome`` and ``LLMError.kind`` (their meanings: the package's docstring).
OUTCOMES = (
    "ok", "rate_limited", "server_error", "connection_error", "timeout", "context_window", "bad_response",
    "error",
)


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
    cached: bool = False  # taken from a ReplyCache: no call was made (llm/cache.py)
