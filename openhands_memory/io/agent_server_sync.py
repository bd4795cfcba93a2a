"""What an OpenHands agent server holds, pulled through its REST API into the database: the
gaps its webhooks left (its queue dropped events while the receiver was down, or the receiver
started after its conversations did).

What will be read is listed first (``source``), so that an agent server that cannot be read
leaves the database untouched. For each conversation (``GET /api/conversations/search``, or
the one named): its info
(``GET /api/conversations/{id}``) and its events, 100 at a time, oldest first
(``GET /api/conversations/{id}/events/search``), each page stored as a webhook batch is
(``agent_server.ingest_events``: one transaction, events stored already skipped, waiting ones
released once their parents land). So a sync is idempotent, and one stopped midway is resumed
by running it again: what it stored stays, and is skipped. A conversation already whole (its
newest event stored, nothing waiting, no fewer rows than the agent server lists) is not
paged through at all: a receiver that backfills at every start reads one event of each.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Callable

from ..errors import OpenHandsMemoryError, shown
from ..storage import END
from . import agent_server

if TYPE_CHECKING:
    from ..conversation import EventStore

PAGE = 100  # the most the agent server lists at once
#: ``progress(events done, events in all)`` as the pages land.
Progress = Callable[[int, int], None]


class SyncFailed(OpenHandsMemoryError):
    """The agent server could not be read; what was stored before stays (run it again)."""


@dataclass
class SyncResult:
    conversations: int = 0
    events: int = 0  # listed by the agent server
    stored: int = 0  # new rows (released waiting events included)
    waiting: int = 0  # still waiting for a parent the agent server did not list

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Client:
    """The agent server's REST API at ``url``, with its session key (``X-Session-API-Key``)."""

    def __init__(self, url: str, key: str | None = None, timeout: float = 30.0):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise SyncFailed(f"{shown(url)} is not an agent server's address (http://HOST:PORT)")
        self.url = url.rstrip("/")
        self.key = key
        self.timeout = timeout

    def get(self, path: str, **query: Any) -> Any:
        q = urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        target = f"{self.url}{path}" + (f"?{q}" if q else "")
        headers = {"Accept": "application/json", **({agent_server.KEY_HEADER: self.key} if self.key else {})}
        try:
            with urllib.request.urlopen(urllib.request.Request(target, headers=headers), timeout=self.timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            if e.code in (401, 403):
                raise SyncFailed(f"the agent server at {self.url} refused the key (HTTP {e.code}): give its "
                                 "session key with --api-key") from None
            raise SyncFailed(f"the agent server at {self.url} answered HTTP {e.code} to {path}") from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise SyncFailed(f"cannot reach the agent server at {self.url}: {reason}") from None
        except ValueError:
            raise SyncFailed(f"the agent server at {self.url} answered {path} with something not JSON") from None

    def conversations(self) -> list[str]:
        out: list[str] = []
        page: str | None = None
        while True:
            found = self.get("/api/conversations/search", limit=PAGE, page_id=page, sort_order="CREATED_AT")
            out += [item["id"] for item in found.get("items", [])]
            page = found.get("next_page_id")
            if not page:
                return out

    def count(self, cid: str) -> int:
        return int(self.get(f"/api/conversations/{cid}/events/count"))

    def info(self, cid: str) -> dict[str, Any]:
        return self.get(f"/api/conversations/{cid}")

    def newest(self, cid: str) -> str | None:
        """The id of the conversation's newest event (None: it has none)."""
        found = self.get(f"/api/conversations/{cid}/events/search", limit=1, sort_order="TIMESTAMP_DESC")
        items = found.get("items", [])
        return items[0]["id"] if items else None

    def pages(self, cid: str) -> Any:
        page: str | None = None
        while True:
            found = self.get(f"/api/conversations/{cid}/events/search", limit=PAGE, page_id=page,
                             sort_order="TIMESTAMP")
            yield found.get("items", [])
            page = found.get("next_page_id")
            if not page:
                return


@dataclass
class Source:
    """What a sync will read, listed before the database is touched: the agent server, its
    conversations (or the one named) and how many events each has."""

    client: Client
    counts: dict[str, int]


def source(url: str, *, key: str | None = None, conversation: str | None = None) -> Source:
    """The agent server at ``url`` and what it holds (every conversation, or the one named:
    its UUID, with or without dashes); ``SyncFailed`` if it cannot be read."""
    client = Client(url, key)
    if conversation is not None:
        try:
            ids = [str(uuid.UUID(conversation))]
        except ValueError:
            raise SyncFailed(f"{shown(conversation)} is not an agent server's conversation id (a UUID)") from None
    else:
        ids = client.conversations()
    return Source(client, {cid: client.count(cid) for cid in ids})


#: How a sync writes: ``run(work)`` calls ``work(store)`` and returns what it returns (``serve
#: --ingest`` runs it under the lock its webhooks write under: ``web/ingest.py``).
Runner = Callable[[Callable[["EventStore"], Any]], Any]


def sync(store: "EventStore", src: Source, progress: Progress | None = None) -> SyncResult:
    """Pull what ``store`` lacks of ``src``'s conversations."""
    return sync_through(lambda work: work(store), src, progress)


def sync_through(run: Runner, src: Source, progress: Progress | None = None) -> SyncResult:
    """``sync``, each transaction (a conversation's info, a page of its events) written
    through ``run``: whatever else writes through it goes between two pages, not inside one."""
    client = src.client
    total, done = sum(src.counts.values()), 0
    result = SyncResult(conversations=len(src.counts))
    for cid, listed in src.counts.items():
        info = json.dumps(client.info(cid)).encode()
        run(lambda store: agent_server.ingest_conversation(store, info))
        newest = client.newest(cid) if listed else None
        if newest is not None and run(lambda store: _complete(store, cid, listed, newest)):
            result.events += listed  # (nothing to pull: its pages are not read)
            done += listed
            if progress is not None:
                progress(min(done, total), max(total, done))
            continue
        hex_id = uuid.UUID(cid).hex
        for items in client.pages(cid):
            if not items:
                continue
            body = json.dumps(items).encode()
            got = run(lambda store: agent_server.ingest_events(store, hex_id, body))
            result.events += len(items)
            result.stored += got.stored
            done += len(items)
            if progress is not None:
                progress(min(done, total), max(total, done))
    waiting = run(agent_server.waiting_counts)
    result.waiting = sum(n for cid, n in waiting.items() if cid in src.counts)
    return result


def _complete(store: "EventStore", cid: str, listed: int, newest: str) -> bool:
    """Whether ``store`` holds all of a conversation the agent server lists ``listed`` events
    of, ``newest`` the last: that event is stored (and so every event before it on its path:
    a parent is stored before its children), nothing waits, and no fewer rows are held."""
    with store.reading() as db:
        if not db.conversation_exists(cid) or db.pending_count(cid):
            return False
        return db.last_seq(cid) + 1 >= listed and bool(db.seqs_of(cid, END, [newest]))
