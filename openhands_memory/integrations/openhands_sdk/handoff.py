"""What SDKCondenser knows about a Condensation that the SDK's event cannot carry.

The SDK's ``Condensation`` has no room for why it was made (the strategy, its reasons and
settings, tokens before and after) or for the ledger of the model calls that wrote its
summary. SDKCondenser leaves both here under the condensation's id; when the SDK stores that
event through a DatabaseFileStore of the same process, the store takes them and writes them
in the event's transaction, so ``history`` and the ``llm_call`` ledger show SDK-made
condensations as they show the library's own. A condensation stored elsewhere (another
process, another FileStore) simply goes without; the bounded size keeps those from piling up.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ...events import CondensationNote

KEPT = 64


@dataclass(frozen=True)
class Handoff:
    note: CondensationNote | None
    calls: list[Any] = field(default_factory=list)  # condensers.llm_base.LedgerEntry


_pending: OrderedDict[str, Handoff] = OrderedDict()
_lock = threading.Lock()


def leave(condensation_id: str, handoff: Handoff) -> None:
    with _lock:
        _pending[condensation_id] = handoff
        while len(_pending) > KEPT:
            _pending.popitem(last=False)


def take(condensation_id: str) -> Handoff | None:
    with _lock:
        return _pending.pop(condensation_id, None)
