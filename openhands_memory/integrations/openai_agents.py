"""A session for the OpenAI Agents SDK, kept as a conversation of events.

    from agents import Agent, Runner
    from openhands_memory.integrations.openai_agents import MemorySession

    session = MemorySession("run-1", "agent.db", condenser="llm_summarizing", max_tokens=60_000)
    result = await Runner.run(agent, "Fix the failing date test", session=session)

``MemorySession`` implements the SDK's ``Session`` protocol (``session_id``,
``session_settings``, ``get_items``, ``add_items``, ``pop_item``, ``clear_session``) over a
``chat.ChatHistory``, on SQLite or PostgreSQL; the SDK itself is not imported (a settings
dict is turned into its ``SessionSettings`` when given). What it changes:

* ``get_items`` returns the condensed view: the summary in place of what a condensation
  forgot, which stays stored (searchable, readable, replayable). ``limit`` counts the
  newest items and never splits a ``function_call`` from its output, nor a reasoning item
  from the item that follows it (``chat.units``): the window starts earlier instead.
* The condenser runs at the end of ``add_items`` (``compaction="add_items"``, the default,
  with any model; not while a call waits for its output), or only when the SDK calls
  ``run_compaction`` (``compaction="run_compaction"``: it does after a Responses model's
  turn; ``force`` makes the condenser act). The SDK reads a session once per run, so the
  next run sends the condensed view. Summarizer calls land in the ledger as for any
  conversation.
* ``pop_item`` takes the newest item off the branch (HEAD moves back; the item stays stored
  on the branch left behind) and returns it, as the SDK's stores do.
* ``clear_session`` starts a new, empty branch: the next item starts a new root, and the
  history before stays stored and readable (``branches()``, ``view --at``, search). Deleting
  would lose what a user or a replay may need later, and an append-only history is what
  keeps ids gap-free for other processes reading it; ``EventStore.delete_conversation``
  deletes for real.

The SDK calls the methods from its event loop; each runs in a worker thread (the database
work, and a summarizer's model call, never block the loop), one at a time per session.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, TypeVar

from ..chat import ChatHistory
from ..conversation import DEFAULT_PATH, EventStore

T = TypeVar("T")
Compaction = Literal["add_items", "run_compaction"]


class MemorySession:
    """The Agents SDK's ``Session`` over a ``ChatHistory`` (see the module's docstring).

    ``location``: an SQLite file, a ``postgresql://`` URL or an open ``EventStore``;
    ``condenser`` and ``max_tokens`` as ``ChatHistory`` takes them; ``session_settings``:
    the SDK's ``SessionSettings`` (or a dict of it), whose ``limit`` applies when
    ``get_items`` is given none; ``compaction``: when the condenser runs.
    """

    session_settings: Any = None

    def __init__(self, session_id: str, location: str | Path | EventStore = DEFAULT_PATH, condenser: Any = None, *,
                 max_tokens: int | None = None, session_settings: Any = None, compaction: Compaction = "add_items"):
        if compaction not in ("add_items", "run_compaction"):
            raise ValueError(f"compaction must be 'add_items' or 'run_compaction', not {compaction!r}")
        self.session_id = session_id
        self.session_settings = _settings(session_settings)
        self.compaction = compaction
        self.history = ChatHistory(location, session_id, condenser, max_tokens=max_tokens)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MemorySession({self.session_id!r}, {self.history.store.location.label!r})"

    async def _run(self, work: Callable[..., T], *args: Any) -> T:
        def locked() -> T:
            with self._lock:
                return work(*args)

        return await asyncio.to_thread(locked)

    # --- the Session protocol -----------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The condensed view as input items, oldest first; the newest ``limit`` of them
        (or the settings' limit) without splitting a call from its output."""
        if limit is None and self.session_settings is not None:
            limit = getattr(self.session_settings, "limit", None)
        return await self._run(lambda: self.history.messages(condense=False, limit=limit))

    async def add_items(self, items: list[Any]) -> None:
        """Store the items (one transaction), then condense if the condenser says so."""
        if not items:
            return
        await self._run(self._add, list(items))

    def _add(self, items: list[Any]) -> None:
        self.history.extend(items)
        # Not while a call waits for its output: no cut can fall inside a tool exchange, and
        # the view leaves the call out (with a warning) until its output is there.
        if self.compaction == "add_items" and self.history.condenser is not None and not self.history.open_calls:
            self.history.condense()

    async def pop_item(self) -> dict[str, Any] | None:
        """The newest item, taken off the branch (it stays stored on the branch left behind)."""
        return await self._run(self.history.pop)

    async def clear_session(self) -> None:
        """A new empty branch; the history before stays stored and readable."""
        await self._run(self.history.clear)

    async def run_compaction(self, args: Mapping[str, Any] | None = None) -> None:
        """Condense now, as the SDK asks after a Responses model's turn (``force``: the
        condenser must act). Nothing happens without a condenser."""
        if self.history.condenser is None:
            return
        force = bool((args or {}).get("force"))
        await self._run(lambda: self.history.condense(force=force))

    # --- beyond the protocol ------------------------------------------------------------

    def fork(self, at: int | None = None, session_id: str | None = None) -> "MemorySession":
        """A new session holding this one's branch up to event ``at`` (None: HEAD), with the
        same condenser and settings, in the same database."""
        made = self.history.fork(at, session_id)
        out = MemorySession.__new__(MemorySession)
        out.session_id = made.conversation.id
        out.session_settings = self.session_settings
        out.compaction = self.compaction
        out.history = made
        out._lock = threading.Lock()
        return out

    def close(self) -> None:
        self.history.close()


def _settings(value: Any) -> Any:
    """The SDK's ``SessionSettings`` from a dict (the SDK resolves a session's own settings
    as that class); anything else as it is."""
    if isinstance(value, Mapping):
        from agents.memory import SessionSettings

        return SessionSettings(**value)
    return value
