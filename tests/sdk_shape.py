"""Histories shaped as the OpenHands SDK writes them, small enough for tests.

System prompt, first user message, then steps: a tool-call batch (one action, or 2-3
parallel ones sharing a response id), then their observations; now and then an agent
message and a new user message. Whenever the view passes ``max_size`` events, a Condensation
is written as the SDK's ``LLMSummarizingCondenser(max_size, keep_first)`` writes it: its
``forgotten_event_ids`` list only events that were in the view (the previous summary's
``<id>-summary`` included, never the Condensation rows in between), ``summary_offset`` is
``keep_first``. ``bench/sdk_workload.py`` is the full-size version for benchmarks.
"""

from __future__ import annotations

import random
from typing import Iterator

from openhands_memory.events import Condensation, Event

from . import factories as f


def sdk_history(
    steps: int, *, seed: int = 0, thinking: bool = False, max_size: int = 120, keep_first: int = 4,
    prefix: str = "",
) -> Iterator[Event]:
    rnd = random.Random(seed)
    view: list[tuple[str, bool]] = []  # (external id, starts a batch or message) in view order
    n = 0

    def emit(e: Event, starts: bool) -> Event:
        view.append((e.id, starts))
        return e

    def uid() -> str:
        nonlocal n
        n += 1
        return f"{prefix}{seed}-{n}"

    yield emit(f.system().model_copy(update={"id": uid()}), True)
    yield emit(f.user("fix the failing test").model_copy(update={"id": uid()}), True)
    for step in range(steps):
        if rnd.random() < 0.01:
            yield emit(f.agent_says("what next?").model_copy(update={"id": uid(), "llm_response_id": uid()}), True)
            yield emit(f.user("keep going").model_copy(update={"id": uid()}), True)
        response = uid()
        calls = [uid() for _ in range(rnd.choice((2, 3)) if rnd.random() < 0.1 else 1)]
        for i, call in enumerate(calls):
            a = f.action(response, call, think=thinking and i == 0, thought="checking" if i == 0 else "")
            yield emit(a.model_copy(update={"id": uid()}), i == 0)
        for call in calls:
            yield emit(f.observation(call, f"exit 0 from {call}").model_copy(update={"id": uid()}), False)
        if len(view) > max_size:
            yield condensation(view, uid(), max_size, keep_first)


def condensation(view: list[tuple[str, bool]], cid: str, max_size: int, keep_first: int) -> Condensation:
    """Forget the middle of ``view`` as the SDK's summarizing condenser does; update ``view``."""
    tail = max_size // 2 - keep_first - 1
    cut = len(view) - tail
    while cut < len(view) and not view[cut][1]:  # start the tail at a batch or a message
        cut += 1
    forgotten = [uid for uid, _ in view[keep_first:cut]]
    view[keep_first:cut] = [(f"{cid}-summary", True)]
    return Condensation(
        id=cid, forgotten_event_ids=forgotten, summary=f"summary {cid}", summary_offset=keep_first,
        llm_response_id=f"{cid}-response",
    )
