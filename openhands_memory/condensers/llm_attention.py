"""LLMAttention: the model ranks events by importance; the most important are kept.

The head stays; the model's ranking (ids it did not see, or repeats, are ignored) picks what
else to keep, back-filled with the newest events up to ``max_size // 2``. Keeping an event
keeps the whole unit it belongs to (a tool call with its result, a batch, a thinking loop),
so the result is always well-formed. No summary is written. Without a model, or when its
reply is unusable and the requirement is hard, the newest events are kept.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import ClassVar

from ..errors import NoCondensationAvailable
from ..events import Condensation
from ..llm import LLMReply, complete
from ..settings import settings
from ..strategy import ModelCalls
from ..view import View
from ..view.tokens import TokenSource
from .base import Reason, runs_at, system_floor
from .llm_base import LLMCondenser, ModelNotCalled, SummarizerFailed, longest
from ..view.rendering import clip, describe

INSTRUCTIONS = """\
A software agent's context is full. Below are its recent steps, each marked with an id.
Rank them by how much the agent needs them to finish its task: what the user asked for,
facts it will use again, the state of files and tests, and unresolved errors come first;
repeated, superseded or idle steps come last. Answer with JSON of the form
{"ids": [most important id, next, ...]}, listing only ids shown below."""

SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "ImportantEvents",
        "schema": {
            "type": "object",
            "properties": {"ids": {"type": "array", "items": {"type": "integer"}}},
            "required": ["ids"],
            "additionalProperties": False,
        },
    },
}


def units(view: View) -> list[range]:
    """The view cut into the smallest pieces that may be kept or forgotten alone."""
    cuts = sorted(view.manipulation_indices)
    return [range(a, b) for a, b in zip(cuts, cuts[1:])]


def parse_ranking(reply: LLMReply) -> list[int]:
    try:
        data = json.loads(reply.text or "")
    except ValueError as e:
        raise ValueError(f"the reply is not JSON: {e}") from None
    ids = data.get("ids") if isinstance(data, dict) else None
    if not isinstance(ids, list):
        raise ValueError('the reply has no "ids" list')
    return [i for i in ids if isinstance(i, int) and not isinstance(i, bool)]


@settings()
class LLMAttentionCondenser(LLMCondenser):
    type = "llm_attention"

    purpose: ClassVar[str] = "attention"

    def ranking(self, view: View, calls: ModelCalls) -> list[int]:
        """View positions, most important first, as the model ranks them."""
        config = self.llm_config
        if config is None:
            return []
        numbered = [(e.seq, e) for e in view.events if e.seq is not None]

        def request(limit: int):
            listing = "\n\n".join(f"<event id={seq}>\n{clip(describe(e), limit)}\n</event>" for seq, e in numbered)
            messages = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": listing}]
            return complete(config, messages, response_format=SCHEMA)

        seqs = self.ask(calls, request, parse_ranking, longest([e for _, e in numbered]))
        position = {e.seq: p for p, e in enumerate(view.events) if e.seq is not None}
        return [position[s] for s in seqs if s in position]

    def keep_set(self, view: View, ranked: list[int], reasons: set[Reason], tokens: TokenSource) -> set[int]:
        head = max(self.keep_first, system_floor(view))
        # As many events as the reasons ask to keep: max_size // 2 for too many events,
        # half the view for a request, what fits half the token limit for tokens.
        target = max(self.keep_first + self.tail_length(view, reasons, tokens), head + 1)
        pieces = units(view)
        unit_of = {p: u for u in pieces for p in u}
        keep: set[int] = set(range(min(head, len(view))))
        for p in list(keep):
            keep.update(unit_of.get(p, ()))
        # The model's choice first, then the newest events, whole units at a time.
        for p in ranked + list(range(len(view) - 1, -1, -1)):
            if len(keep) >= target:
                break
            keep.update(unit_of.get(p, (p,)))
        return keep

    def get_condensation(self, view: View, reasons: set[Reason], tokens: TokenSource, calls: ModelCalls) -> Condensation:
        return self._forget_all_but(view, self.keep_set(view, self.ranking(view, calls), reasons, tokens))

    def fallback(self, view: View, reasons: set[Reason], error, tokens: TokenSource,
                 calls: ModelCalls) -> Condensation | None:
        if self.hard_fallback == "raise" or isinstance(error, ModelNotCalled):
            return None  # a preview shows what the model would decide, or nothing
        # A ranking that was made but led nowhere did not produce what the fallback writes
        # (``calls`` is this run's own record: ``LLMCondenser.condense``).
        calls.calls[:] = [replace(c, produced=False) for c in calls.calls]
        if isinstance(error, SummarizerFailed) or self.hard_fallback == "offline":
            try:
                return self._forget_all_but(view, self.keep_set(view, [], reasons, tokens))
            except NoCondensationAvailable:
                return None
        return super().fallback(view, reasons, error, tokens, calls)

    def _forget_all_but(self, view: View, keep: set[int]) -> Condensation:
        forget = [p for p in range(len(view)) if p not in keep and view.events[p].seq is not None]
        if not forget:
            raise NoCondensationAvailable("every event is kept: nothing to forget")
        return Condensation(forgotten_ranges=runs_at(view, forget))
