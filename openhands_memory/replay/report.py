"""What a replay reports: per model call and in total, per strategy (pydantic, so that
``--json`` is one ``model_dump_json`` and equal inputs give byte-identical output)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class CallInput(BaseModel):
    """What one strategy would have sent at one recorded model call."""

    call: int = Field(description="the model call's number, 0 first")
    seq: int = Field(description="the source id of the response's first event")
    input_tokens: int
    cached_tokens: int = Field(description="tokens of the previous call's input left unchanged at its start")
    events: int = Field(description="events in the view sent")
    condensed: bool = Field(description="a condensation was made right before this call")


class Prices(BaseModel):
    """litellm's price map for ``model``, in USD per token (None: the map has no such price)."""

    model: str
    input: float | None = None
    cached_input: float | None = None
    output: float | None = None


class Totals(BaseModel):
    """One strategy over the whole history."""

    calls: int
    input_tokens: int
    cached_tokens: int
    output_tokens: int = Field(description="the recorded responses' tokens: the same for every strategy")
    peak_context: int
    condensations: int
    summary_calls: int = 0
    summary_input_tokens: int = 0
    summary_output_tokens: int = 0
    summary_cache_hits: int = Field(0, description="summaries whose model reply a cache kept")
    model_calls: int = Field(0, description="model calls the replay made for summaries")
    model_spent_usd: float | None = Field(None, description="what those calls cost the replay")
    forgotten: dict[str, int] = Field(default_factory=dict, description="events forgotten (or masked), by kind")
    pins_broken: int = 0
    pairs_broken: int = 0
    lost: int = Field(0, description="forgotten events whose distinctive strings a later response used again")
    lost_examples: list[str] = Field(default_factory=list)
    cost_usd: float | None = Field(None, description="without a prompt cache, summary calls included")
    cost_cached_usd: float | None = Field(None, description="with a prompt cache reusing cached_tokens")


class StrategyReplay(BaseModel):
    """One strategy's replay: its label, its settings, each call, and the totals."""

    label: str
    baseline: bool = False
    config: dict = Field(default_factory=dict)
    summarizer: str | None = None
    calls: list[CallInput]
    totals: Totals


class Replay(BaseModel):
    """A conversation's recorded history replayed under strategies (the first: the baseline,
    what the recorded run itself sent)."""

    conversation: str
    events: int
    calls: int
    tokenizer: str
    prices: Prices | None = None
    strategies: list[StrategyReplay]


class ReplaySet(BaseModel):
    """Several conversations replayed under the same strategies, and their sums."""

    conversations: list[Replay]
    totals: list[StrategyReplay] = Field(description="per strategy: the sums over conversations (calls empty)")
