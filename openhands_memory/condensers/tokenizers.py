"""Which token counter a condenser's ``tokenizer`` setting names.

``"chars/4"`` (or nothing) is the declared estimate (``view.tokens.CharEstimate``); any
other value is a model name whose tokenizer litellm provides (tiktoken for OpenAI models, a
default otherwise). The counting itself is ``view/tokens.py``'s; the counts cached in rows
are the conversation's (``conversation/tokens.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..view.tokens import ESTIMATE, CharEstimate, TokenCounter


@dataclass(frozen=True)
class LiteLLMCounter:
    """litellm's tokenizer for ``model``."""

    model: str

    @property
    def name(self) -> str:
        return f"litellm:{self.model}"

    def count(self, messages: list[dict]) -> int:
        from ..llm import count_tokens

        return count_tokens(self.model, messages) if messages else 0


def counter_for(tokenizer: str | None) -> TokenCounter:
    """The estimate for ``"chars/4"`` or None, otherwise litellm's tokenizer for a model."""
    if tokenizer in (None, "", ESTIMATE):
        return CharEstimate()
    return LiteLLMCounter(tokenizer)
