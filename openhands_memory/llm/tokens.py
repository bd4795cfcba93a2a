"""Token counts, context windows and prices, as litellm knows them.

They come from what litellm ships, read without importing litellm (``counting.py``: its
tokenizers; ``price_map.py``: its price map), so that counting or pricing costs milliseconds
rather than litellm's import. A case those modules do not cover (an image to count, a model
name the map holds under another spelling) is answered by litellm itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .config import LLMConfig
from .counting import count_messages, text_counter
from .errors import TokenizerUnavailable
from .loader import load_litellm
from .price_map import entry, number


def count_tokens(
    model: str,
    text_or_messages: str | Sequence[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
) -> int:
    """Tokens in a string or a list of chat messages, per litellm's tokenizer for ``model``.

    Raises ``TokenizerUnavailable`` on failure: a silent 0 would disable token triggers.
    """
    count = _count_offline(model, text_or_messages, tools)
    if count is None:
        count = _count_with_litellm(model, text_or_messages, tools)
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise TokenizerUnavailable(model, f"tokenizer returned {count!r}")
    return count


def _count_offline(model: str, text_or_messages: Any, tools: list[dict[str, Any]] | None) -> int | None:
    if tools:  # tool definitions: litellm's own rendering of them
        return None
    if isinstance(text_or_messages, str):
        counter = text_counter(model)
        return counter(text_or_messages) if counter is not None else None
    if isinstance(text_or_messages, (list, tuple)):
        return count_messages(model, text_or_messages)
    return None


def _count_with_litellm(model: str, text_or_messages: Any, tools: list[dict[str, Any]] | None) -> Any:
    litellm = load_litellm()
    try:
        if isinstance(text_or_messages, str):
            return litellm.token_counter(model=model, text=text_or_messages)
        return litellm.token_counter(model=model, messages=list(text_or_messages), tools=tools)
    except Exception as exc:
        raise TokenizerUnavailable(model, f"{type(exc).__name__}: {exc}") from exc


def _model_info(model: str) -> Mapping[str, Any] | None:
    """The price map's entry for ``model`` as ``litellm.get_model_info`` returns it; None when
    the map has no such model (never raises)."""
    found = entry(model)
    if found is not None:
        return found
    try:
        info = load_litellm().get_model_info(model)
    except Exception:  # noqa: BLE001 - unmapped models are common (local, proxied)
        return None
    return info if isinstance(info, Mapping) else None


def context_window(model: str) -> int | None:
    """The model's input-token limit from litellm's model map; None when unknown (never raises)."""
    info = _model_info(model)
    value = info.get("max_input_tokens") if info is not None else None
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
    map has no such model (never raises). A cached-input price the map lacks is None; an input
    or output price it lacks is 0, as litellm has it."""
    info = _model_info(model)
    if info is None:
        return None
    return (number(info, "input_cost_per_token") or 0.0, number(info, "cache_read_input_token_cost"),
            number(info, "output_cost_per_token") or 0.0)
