"""Token counts and context windows, as litellm knows them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .config import LLMConfig
from .errors import TokenizerUnavailable
from .loader import load_litellm


def count_tokens(
    model: str,
    text_or_messages: str | Sequence[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
) -> int:
    """Tokens in a string or a list of chat messages, per litellm's tokenizer for ``model``.

    Raises ``TokenizerUnavailable`` on failure: a silent 0 would disable token triggers.
    """
    litellm = load_litellm()
    try:
        if isinstance(text_or_messages, str):
            count = litellm.token_counter(model=model, text=text_or_messages)
        else:
            count = litellm.token_counter(model=model, messages=list(text_or_messages), tools=tools)
    except Exception as exc:
        raise TokenizerUnavailable(model, f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise TokenizerUnavailable(model, f"tokenizer returned {count!r}")
    return count


def context_window(model: str) -> int | None:
    """The model's input-token limit from litellm's model map; None when unknown (never raises)."""
    try:
        info = load_litellm().get_model_info(model)
        value = info.get("max_input_tokens") if isinstance(info, Mapping) else None
    except Exception:  # noqa: BLE001 - unmapped models are common (local, proxied)
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def effective_max_input_tokens(config: LLMConfig) -> int | None:
    """The configured input limit, else the model's known context window, else None."""
    if config.max_input_tokens is not None:
        return config.max_input_tokens
    return context_window(config.model)


def token_prices(model: str) -> tuple[float | None, float | None, float | None] | None:
    """(input, cached input, output) USD per token from litellm's price map; None when the
    map has no such model (never raises). A price the map lacks is None."""
    try:
        info = load_litellm().get_model_info(model)
    except Exception:  # noqa: BLE001 - unmapped models are common (local, proxied)
        return None
    if not isinstance(info, Mapping):
        return None

    def price(key: str) -> float | None:
        value = info.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    return price("input_cost_per_token"), price("cache_read_input_token_cost"), price("output_cost_per_token")
