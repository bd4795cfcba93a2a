"""The OpenHands agent server's webhooks, received (``serve --ingest``): the two routes it
POSTs to, at the root of the app (``OH_WEBHOOKS_0_BASE_URL=http://HOST:PORT``).

* ``POST /events/{conversation_id_hex}``: a JSON list of events;
* ``POST /conversations``: a conversation's info.

Each answers only once what it brought is committed (``io/agent_server.py``: one transaction
per batch), so a sender that got no 2xx sends it again, and a second delivery stores nothing
twice. The answers: 200 with what was stored; 401 for a missing or wrong
``X-Session-API-Key`` when keys are set; 400 (malformed, not a conversation id), 413 (larger
than an event may be), 422 (an unknown kind) for what sending again would not change; 503
when the database failed (sending again may succeed).

The inspector's pages read through read-only stores; these routes write through one store of
their own, one batch at a time (a lock: SQLite takes one writer anyway, and on PostgreSQL one
connection keeps the batches of a conversation in the order they came).
"""

from __future__ import annotations

import hmac
import logging
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import IngestRefused, OpenHandsMemoryError, ReceiverStopping
from ..io.agent_server import KEY_HEADER
STATUS = {"malformed": 400, "bad_conversation": 400, "too_large": 413, "unknown_kind": 422}
log = logging.getLogger("openhands_memory.ingest")


class WritingStore:
    """The one store ingest writes through, opened on first use, one batch at a time (the
    webhooks' and a backfill's); closed for good by ``close``."""

    def __init__(self, location: str | Path):
        self.location = location
        self._store: Any = None
        self._closed = False
        self._lock = threading.Lock()

    def run(self, work: Callable[[Any], Any]) -> Any:
        with self._lock:
            if self._closed:
                raise ReceiverStopping()
            if self._store is None:
                from ..conversation import EventStore

                self._store = EventStore(self.location)
            return work(self._store)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._store is not None:
                self._store.close()
                self._store = None


def ingest_routes(writer: WritingStore, api_keys: Sequence[str] = (),
                  on_gap: Callable[[str], None] | None = None) -> list[Route]:
    """The webhook routes, writing through ``writer`` (the app closes it). ``on_gap(conversation
    id)``: called when a batch leaves events waiting for a parent (``backfill.Backfill.gap``)."""
    from ..io import agent_server

    keys = [k.encode() for k in api_keys if k]

    def allowed(request: Request) -> bool:
        if not keys:
            return True
        given = request.headers.get(KEY_HEADER, "").encode()
        # compare_digest with every key: how long the check takes says nothing of a key.
        return any([hmac.compare_digest(given, k) for k in keys])

    async def receive(request: Request, work: Callable[[Any, bytes], Any]) -> Response:
        if not allowed(request):
            return _answer(401, f"missing or wrong {KEY_HEADER} header; nothing was stored")
        body = await _body(request, agent_server.MAX_BODY_BYTES)
        if body is None:
            return _answer(413, f"the request is larger than the {agent_server.MAX_BODY_BYTES:,} bytes a batch "
                                "may hold; nothing was stored")
        try:
            return JSONResponse(await run_in_threadpool(writer.run, lambda store: work(store, body)))
        except IngestRefused as e:
            return _answer(STATUS.get(e.reason, 400), str(e))
        except OpenHandsMemoryError as e:
            log.warning("ingest failed, the sender will retry: %s", e)
            # The library's message says whether the batch may have landed; either way sending
            # it again is safe (what is stored already is skipped).
            return _answer(503, f"{e} (send the batch again: what is stored already is skipped)")

    def store_events(store: Any, hex_id: str, body: bytes) -> dict[str, Any]:
        result = agent_server.ingest_events(store, hex_id, body)
        if result.waiting and on_gap is not None:
            on_gap(result.conversation_id)
        return result.as_dict()

    async def events(request: Request) -> Response:
        hex_id = request.path_params["conversation"]
        return await receive(request, lambda store, body: store_events(store, hex_id, body))

    async def conversations(request: Request) -> Response:
        return await receive(request, lambda store, body: {"conversation": agent_server.ingest_conversation(store, body)})

    return [
        Route("/events/{conversation}", events, methods=["POST"]),
        Route("/conversations", conversations, methods=["POST"]),
    ]


async def _body(request: Request, limit: int) -> bytes | None:
    """The request's body, or None once it passes ``limit`` bytes (read no further)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        parts.append(chunk)
    return b"".join(parts)


def _answer(status: int, message: str) -> Response:
    return JSONResponse({"error": " ".join(message.split())}, status_code=status)
