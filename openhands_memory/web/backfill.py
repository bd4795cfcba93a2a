"""``serve --ingest --backfill URL``: the gaps the agent server's webhooks left, filled from its
REST API while the receiver runs, without anyone running ``sync``.

Two things call for it:

* *The receiver starts.* Conversations may have run while it was down, or before it existed:
  every conversation the agent server lists is synced once, in the background, while the
  webhooks are already being received.
* *A batch leaves events waiting for a parent* (``io/agent_server.py``). The sender may still
  be retrying the batch that holds the parent, so the conversation is synced ``delay`` seconds
  later, unless nothing of it waits by then.

A sync writes each page as a webhook batch is written, through the ingest's store and under
its lock (``WritingStore.run``), so the two never race, and pages and batches interleave; a
sync stores only what is missing, so running one when a retry got there first costs reads,
not rows. An agent server that cannot be read is one warning line, and is tried again later
(the wait doubling from ``delay`` to five minutes); what was stored stays.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from ..errors import OpenHandsMemoryError, ReceiverStopping

if TYPE_CHECKING:
    from ..io.agent_server_sync import Runner, SyncResult

log = logging.getLogger("openhands_memory.ingest")

#: Seconds a gap waits for the sender's retries before it is pulled (the agent server retries a
#: batch ``num_retries`` times, ``retry_delay`` seconds apart: 3 and 5 by default).
DELAY = 20.0
#: The longest wait before an agent server that could not be read is tried again.
MAX_WAIT = 300.0
#: Failed tries after which a conversation's gap is left to ``sync`` (the agent server may no
#: longer have it); the start's sweep is tried until it succeeds.
TRIES = 8
#: What the schedule calls every conversation the agent server lists (the start's sweep).
EVERY = ""


class Backfill:
    """The agent server at ``url`` (its session key ``key``) read into the database through
    ``run`` (the ingest's ``WritingStore.run``): at ``start``, then for each ``gap``."""

    def __init__(self, url: str, key: str | None, run: "Runner", delay: float = DELAY):
        from ..io.agent_server_sync import Client

        Client(url, key)  # a malformed address is refused here, not in the thread
        self.url, self.key, self.run, self.delay = url, key, run, delay
        self._due: list[tuple[float, str]] = []  # (when, conversation or EVERY), a heap
        self._failures: dict[str, int] = {}  # what failed, and how many times in a row
        self._wake = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="backfill", daemon=True)

    def start(self) -> None:
        self._schedule(EVERY, 0.0)
        self._thread.start()

    def gap(self, conversation_id: str) -> None:
        """Events of ``conversation_id`` wait for a parent: pull it after ``delay``."""
        self._schedule(conversation_id, self.delay)

    def close(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _schedule(self, target: str, after: float) -> None:
        with self._wake:
            if any(t == target for _, t in self._due):
                return  # already due, no later than this would be
            heapq.heappush(self._due, (time.monotonic() + after, target))
            self._wake.notify()

    def _next(self) -> str | None:
        """The next target once it is due; None when stopping."""
        with self._wake:
            while not self._stopping:
                now = time.monotonic()
                if self._due and self._due[0][0] <= now:
                    return heapq.heappop(self._due)[1]
                self._wake.wait(self._due[0][0] - now if self._due else None)
            return None

    def _loop(self) -> None:
        while (target := self._next()) is not None:
            try:
                result = self.fill(target)
            except ReceiverStopping:
                return
            except OpenHandsMemoryError as e:  # (SyncFailed, a database failure): try again later
                self._failed(target, " ".join(str(e).split()))
                continue
            except Exception as e:  # a fault of this code: said, and tried again, never silent
                log.exception("backfill of %s failed", _what(target))
                self._failed(target, f"{type(e).__name__}: {e}")
                continue
            self._failures.pop(target, None)
            if result is not None:
                still = f", {result.waiting} still waiting for a parent the agent server did not list" \
                    if result.waiting else ""
                log.info("backfill of %s from %s: %d events listed, %d stored%s", _what(target), self.url,
                         result.events, result.stored, still)

    def _failed(self, target: str, why: str) -> None:
        n = self._failures[target] = self._failures.get(target, 0) + 1
        if target != EVERY and n >= TRIES:
            self._failures.pop(target)
            log.warning("backfill of %s: %s; left with its gap after %d tries (run sync to fill it)",
                        _what(target), why, n)
            return
        wait = min(MAX_WAIT, max(self.delay, 1.0) * 2 ** (n - 1))
        log.warning("backfill of %s: %s; trying again in %.0f s", _what(target), why, wait)
        self._schedule(target, wait)

    def fill(self, target: str) -> "SyncResult | None":
        """Sync ``target`` (a conversation, or ``EVERY``) now; None for a conversation whose
        waiting events all landed meanwhile (its sender's retry brought their parents)."""
        if target != EVERY and not self.run(_waiting_in(target)):
            return None
        from ..io.agent_server_sync import source, sync_through

        src = source(self.url, key=self.key, conversation=None if target == EVERY else target)
        return sync_through(self.run, src)


def _what(target: str) -> str:
    return "every conversation" if target == EVERY else f"conversation {target}"


def _waiting_in(conversation_id: str) -> Callable[[Any], int]:
    from ..io.agent_server import waiting_counts

    return lambda store: waiting_counts(store).get(conversation_id, 0)
