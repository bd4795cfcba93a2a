"""Replaying a recorded history under strategies, in a scratch database.

For each strategy, the history's events (the current branch, oldest first) are appended to
a conversation of the scratch database in the order they were recorded; at each recorded
model call (``calls.py``), the strategy condenses as ``Conversation.condense`` would have
at that step, and the view it leaves is what the model would have been sent (``meter.py``
measures it). The recorded run's own condensations are left out, except for the baseline,
which appends them as recorded and runs no strategy: what was actually sent.

The source is only read. Model calls (``--llm``) go to the scratch database's ledger; its
conversations for a source are replaced by each replay of it.

A conversation runs its replay (``Conversation.replay``) and hands itself in, so this module
knows conversations and stores only by what it asks of them (``Source``, ``ScratchStore``,
``Replaying``): importing them would make the two modules a cycle.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol, Sequence

from .. import limits
from ..events import Condensation, CondensationSummaryEvent, Event, ObservationBase, PinnedContextEvent
from ..view.tokens import TokenCounter
from .calls import ModelCall, is_recorded_condensing, model_calls
from .lost import Reuse
from .meter import Meter
from .report import CallInput, Prices, Replay, ReplaySet, StrategyReplay, Totals

if TYPE_CHECKING:
    from ..conversation.condensing import CondenseOutcome
    from ..strategy import Strategy
    from ..view import View

Progress = Callable[[int], None]  # calls done since the last report

#: How a replay names its conversations in the scratch and marks them (``scratch.py`` tells
#: a replay's conversations from anyone else's by these).
PREFIX = "replay:"
MARK = "replay_of"


class Source(Protocol):
    """What a replay reads of the conversation it replays (a ``Conversation``)."""

    @property
    def id(self) -> str: ...

    def view(self) -> View: ...

    def events(self, start: int = 0, stop: int | None = None) -> Iterable[Event]: ...


class Replaying(Protocol):
    """A conversation of the scratch database, where one strategy runs (a ``Conversation``)."""

    def append_many(self, events: Sequence[Event]) -> list[int]: ...

    def view(self) -> View: ...

    def condense(self, condenser: Strategy) -> CondenseOutcome: ...


class ScratchStore(Protocol):
    """Where the strategies run (an ``EventStore``)."""

    def __contains__(self, id: object) -> bool: ...

    def delete_conversation(self, id: str) -> None: ...

    def create_conversation(self, id: str | None = None, *, metadata: dict[str, Any] | None = None) -> Replaying: ...


def scratch_id(source: str, k: int) -> str:
    """The id of a replay's ``k``-th conversation of ``source`` in the scratch:
    ``replay:<source>:<k>``; where that would break the rule of new ids (an SQLite file made
    before it may hold a source id of any length), the source's id is a digest of it there
    (``replay_of`` in the metadata keeps it whole)."""
    cid = f"{PREFIX}{source}:{k}"
    if limits.conversation_id_problem(cid) is None:
        return cid
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{PREFIX}sha256-{digest}:{k}"


@dataclass(frozen=True)
class ModelUse:
    """What the replay itself has asked of models so far (cumulative): calls made, replies
    reused from a cache, and USD spent. Told by whoever runs the model (``llm.ReplyCache``)."""

    calls: int = 0
    reused: int = 0
    spent: float = 0.0


@dataclass(frozen=True)
class Candidate:
    """A strategy to replay, and what to call it."""

    label: str
    condenser: "Strategy"


@dataclass(frozen=True)
class History:
    """What a replay reads of the source once: the branch's events (copies, parents cleared,
    since the scratch numbers them anew) and their ids in the source."""

    conversation: str
    events: list[Event]
    seqs: list[int]
    calls: list[ModelCall]

    @classmethod
    def read(cls, conv: Source) -> History:
        view = conv.view()
        spans = view.path if view.path is not None else [(0, view.upto)]
        events: list[Event] = []
        for lo, hi in spans:
            events += conv.events(lo, hi + 1)
        seqs = [e.seq for e in events]  # type: ignore[misc]
        copies = [e.model_copy(update={"parent_id": None}) for e in events]
        for e, seq in zip(copies, seqs):
            e.with_seq(seq)
        return cls(conv.id, _renumbered(copies, seqs), seqs, model_calls(copies))


def _renumbered(events: list[Event], seqs: list[int]) -> list[Event]:
    """Recorded condensations name what they forgot by source ids: on a branch whose ids
    are not 0, 1, 2, ... (the scratch numbers the path so), by external ids instead."""
    if seqs == list(range(len(seqs))):
        return events
    uid = dict(zip(seqs, (e.id for e in events)))
    out = []
    for e in events:
        if isinstance(e, Condensation) and e.forgotten_ranges:
            named = [uid[s] for lo, hi in e.forgotten_ranges for s in range(lo, hi + 1) if s in uid]
            e = e.model_copy(update={"forgotten_ranges": None,
                                     "forgotten_event_ids": list(e.forgotten_event_ids) + named})
        out.append(e)
    return out


@dataclass
class _Tally:
    """What one strategy's replay adds up besides the per-call figures."""

    condensations: int = 0
    summary_calls: int = 0
    summary_in: int = 0
    summary_out: int = 0
    # Each forgotten (or masked) event's position -> its kind, and the summary then.
    forgotten: dict[int, tuple[str, str | None]] = field(default_factory=dict)
    forgotten_at: dict[int, int] = field(default_factory=dict)  # position -> the forgetting call's


def replay_history(
    history: History,
    candidates: Sequence[Candidate],
    scratch: ScratchStore,
    counter: TokenCounter,
    *,
    prices: Prices | None = None,
    progress: Progress | None = None,
    model_use: Callable[[], ModelUse] | None = None,
) -> Replay:
    """The baseline and each candidate, replayed over ``history`` in ``scratch``.
    ``model_use``: what models have been asked so far, when summaries come from one."""
    counts: dict = {}  # token counts per event object, shared by every run
    tokens = Meter(counter, counts).tokens
    output = [sum(map(tokens, history.events[c.position : c.end])) for c in history.calls]
    ctx = _Context(history, scratch, counter, counts, output, Reuse.of(history.events), prices, progress)
    runs = [_run(ctx, None, "recorded", 0)]
    for k, cand in enumerate(candidates, 1):
        before = model_use() if model_use is not None else None
        run = _run(ctx, cand.condenser, cand.label, k)
        if before is not None:
            after = model_use()  # type: ignore[misc]
            run.totals.model_calls = after.calls - before.calls
            run.totals.summary_cache_hits = after.reused - before.reused
            run.totals.model_spent_usd = round(after.spent - before.spent, 6)
        runs.append(run)
    return Replay(conversation=history.conversation, events=len(history.events), calls=len(history.calls),
                  tokenizer=counter.name, prices=prices, strategies=runs)


@dataclass(frozen=True)
class _Context:
    """What every run of one replay shares: the history, where it runs, how it counts."""

    history: History
    scratch: ScratchStore
    counter: TokenCounter
    counts: dict  # token counts per event object (Meter.counts)
    output: list[int]  # the recorded responses' tokens, per call
    reuse: Reuse
    prices: Prices | None
    progress: Progress | None


def _run(ctx: _Context, condenser: "Strategy | None", label: str, k: int) -> StrategyReplay:
    """One strategy (None: the recorded run) over the history, in conversation ``k`` of the
    scratch database."""
    history, scratch, progress = ctx.history, ctx.scratch, ctx.progress
    baseline = condenser is None
    cid = scratch_id(history.conversation, k)
    if cid in scratch:
        scratch.delete_conversation(cid)
    conv = scratch.create_conversation(cid, metadata={MARK: history.conversation, "strategy": label})
    meter = Meter(ctx.counter, ctx.counts)
    tally = _Tally()
    position_of: dict[int, int] = {}  # scratch id -> position in history.events
    answered: set[str] = set()
    calls: list[CallInput] = []
    summary: str | None = None  # the summary in the view
    sent = None  # the view of the previous call
    done = 0
    for call in history.calls:
        batch = [(i, e) for i, e in enumerate(history.events[done : call.position], done)
                 if baseline or not is_recorded_condensing(e)]
        done = call.position
        condensed = False
        newly = [e.tool_call_id for _, e in batch if isinstance(e, ObservationBase)]
        answered.update(newly)
        if batch:
            seqs = conv.append_many([e for _, e in batch])
            position_of.update(zip(seqs, (i for i, _ in batch)))
            condensed = baseline and any(isinstance(e, Condensation) for _, e in batch)
        if baseline:
            view = conv.view()
        else:
            outcome = conv.condense(condenser)  # type: ignore[arg-type]
            if outcome.error is not None:
                raise outcome.error
            cond = outcome.condensation
            if cond is not None:
                condensed = True
                _tally_condensation(tally, outcome.view, cond, meter)
            view = conv.view() if cond is not None else outcome.result  # type: ignore[assignment]
        extends = sent is not None and view.extends(sent)  # type: ignore[union-attr]
        tokens, cached, change = meter.measure(view.events, answered, newly, extends)  # type: ignore[union-attr]
        sent = view
        tally.condensations += condensed
        summary = next((e.summary for e in change.fresh if isinstance(e, CondensationSummaryEvent)), summary)
        for e in change.forgotten + change.rewritten:
            at = position_of.get(e.seq)  # type: ignore[arg-type]
            if at is not None and at not in tally.forgotten:
                tally.forgotten[at] = (e.kind, summary)
                tally.forgotten_at[at] = call.position
        calls.append(CallInput(call=call.index, seq=call.seq, input_tokens=tokens, cached_tokens=cached,
                               events=len(view.events), condensed=condensed))  # type: ignore[union-attr]
        if progress is not None:
            progress(1)
    pins_broken = _pins_broken(conv)
    return StrategyReplay(
        label=label, baseline=baseline,
        config=condenser.config() if condenser is not None else {},
        summarizer=condenser.summarizer if condenser is not None else None,
        calls=calls,
        totals=_totals(calls, ctx.output, meter, tally, ctx.reuse, ctx.prices, pins_broken),
    )


def _tally_condensation(tally: _Tally, view: "View", cond: Condensation, meter: Meter) -> None:
    """A new summary stands for one summarizer call: what it would be sent (the events it
    forgets and the previous summary) and what it wrote."""
    if cond.summary is None:
        return
    gone = set(view.forgotten_positions(cond))
    tally.summary_calls += 1
    tally.summary_in += sum(meter.tokens(e) for p, e in enumerate(view.events)
                            if p in gone or isinstance(e, CondensationSummaryEvent))
    tally.summary_out += meter.tokens(CondensationSummaryEvent(summary=cond.summary))


def _pins_broken(conv: Replaying) -> int:
    """Keep pins whose event the final view does not show, in place or again after the
    summary (a pin recorded after its event was forgotten is shown again)."""
    view = conv.view()
    shown = {e.seq for e in view.events} | {e.pinned_seq for e in view.events if isinstance(e, PinnedContextEvent)}
    return sum(1 for p in view.pins if p.mode == "keep" and p.seq not in shown)


def _totals(
    calls: list[CallInput], output: list[int], meter: Meter, tally: _Tally, reuse: Reuse,
    prices: Prices | None, pins_broken: int,
) -> Totals:
    forgotten: dict[str, int] = {}
    lost: list[str] = []
    for at, (kind, summary) in sorted(tally.forgotten.items()):
        forgotten[kind] = forgotten.get(kind, 0) + 1
        s = reuse.lost(at, tally.forgotten_at, summary)
        if s is not None:
            lost.append(s)
    input_tokens = sum(c.input_tokens for c in calls)
    cached = sum(c.cached_tokens for c in calls)
    out = sum(output)
    cost = cost_cached = None
    if prices is not None and prices.input is not None and prices.output is not None:
        paid_in = input_tokens + tally.summary_in
        paid_out = out + tally.summary_out
        cost = paid_in * prices.input + paid_out * prices.output
        reuse_price = prices.cached_input if prices.cached_input is not None else prices.input
        cost_cached = cost - cached * (prices.input - reuse_price)
    return Totals(
        calls=len(calls), input_tokens=input_tokens, cached_tokens=cached, output_tokens=out,
        peak_context=meter.peak, condensations=tally.condensations, summary_calls=tally.summary_calls,
        summary_input_tokens=tally.summary_in, summary_output_tokens=tally.summary_out,
        forgotten=dict(sorted(forgotten.items())), pins_broken=pins_broken, pairs_broken=len(meter.broken),
        lost=len(lost), lost_examples=sorted(set(lost))[:5],
        cost_usd=None if cost is None else round(cost, 6),
        cost_cached_usd=None if cost_cached is None else round(cost_cached, 6),
    )


def aggregate(replays: Sequence[Replay]) -> ReplaySet:
    """Conversations replayed under the same strategies, and each strategy's sums over them
    (its peak context: the highest)."""
    sums: list[StrategyReplay] = []
    for k, first in enumerate(replays[0].strategies if replays else []):
        parts = [r.strategies[k].totals for r in replays]
        total = Totals(calls=0, input_tokens=0, cached_tokens=0, output_tokens=0, peak_context=0, condensations=0)
        for t in parts:
            for name in ("calls", "input_tokens", "cached_tokens", "output_tokens", "condensations",
                         "summary_calls", "summary_input_tokens", "summary_output_tokens", "summary_cache_hits",
                         "model_calls", "pins_broken", "pairs_broken", "lost"):
                setattr(total, name, getattr(total, name) + getattr(t, name))
            total.peak_context = max(total.peak_context, t.peak_context)
            for kind, n in t.forgotten.items():
                total.forgotten[kind] = total.forgotten.get(kind, 0) + n
            total.lost_examples = sorted(set(total.lost_examples) | set(t.lost_examples))[:5]
        for name in ("cost_usd", "cost_cached_usd", "model_spent_usd"):
            values = [getattr(t, name) for t in parts]
            setattr(total, name, None if any(v is None for v in values) else round(sum(values), 6))
        total.forgotten = dict(sorted(total.forgotten.items()))
        sums.append(StrategyReplay(label=first.label, baseline=first.baseline, config=first.config,
                                   summarizer=first.summarizer, calls=[], totals=total))
    return ReplaySet(conversations=list(replays), totals=sums)
