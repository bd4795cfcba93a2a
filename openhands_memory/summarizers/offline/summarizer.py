"""The offline summarizer: facts of the new events merged into the previous summary, within
a budget."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, ClassVar

from pydantic import Field

from ...events import CondensationSummaryEvent, Event
from ...searchable import fold_nul
from ...settings import settings
from .budget import cap, fit
from .digest import Digest, from_facts, merge
from .extraction import facts
from .layout import parse
from .text import clip

# A previous summary in another format (one a model wrote) is kept verbatim, up to this long.
EARLIER_CHARS = 4000


@settings("OfflineSummarizer", subject="OfflineSummarizer", frozen=True)
class OfflineSummarizer:
    """Summarizes forgotten events without a model. The same input always gives the same text.

    ``summarize(events, previous_summary)`` merges into ``previous_summary`` when this class
    wrote it. Otherwise it keeps that summary verbatim (clipped to 4,000 chars). The result
    is at most ``max_chars`` long: the oldest list items go first, and the current state
    stays.
    """

    name: ClassVar[str] = "offline"
    max_chars: Annotated[int, Field(ge=200)] = 6000

    def summarize(self, events: Sequence[Event], previous_summary: str | None = None) -> str:
        events = list(events)
        if previous_summary is None:
            # Forgotten events may include the summary shown in an earlier view. It is the
            # previous summary in all but name.
            shown = [e.summary for e in events if isinstance(e, CondensationSummaryEvent)]
            previous_summary = shown[-1] if shown else None
        new = from_facts(facts(events))
        old: Digest | None = None
        if previous_summary and previous_summary.strip():
            old = parse(previous_summary)
            if old is None:
                old = Digest(earlier=clip(previous_summary.strip(), EARLIER_CHARS))
        merged = merge(old, new) if old is not None else new
        cap(merged)
        # A NUL quoted from a tool's output reads as a space, as search reads it: a summary is
        # text for a model, and PostgreSQL's text cannot hold U+0000.
        return fold_nul(fit(merged, self.max_chars))
