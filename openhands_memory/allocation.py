"""Allocating many objects that live on: decoding a long view, rendering its messages,
parsing an import.

Python's cyclic collector runs whenever allocations outnumber deallocations by a threshold,
and each run walks the objects still tracked; a view of N events allocates some twenty
objects an event that all survive, so collection during the load walks the growing heap
again and again (measured: 40 % of open + view + messages at 10k SDK-shaped events, more at
100k). None of these objects form cycles that need the collector, so it is paused for the
bulk work.

The objects that survive the block are then moved straight into the oldest generation
(``gc.freeze`` then ``gc.unfreeze``: two list splices, whatever their number). Left young,
the first collections after the block would walk every one of them twice on their way there
(0.5 s of a 100k-event view with its messages). The oldest generation is walked only when it
has grown by a quarter since its last walk, counted without these objects. A cycle made
elsewhere during the block is promoted with them: it is collected, later.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside the block (nested blocks leave it to the outermost; the
    collector is process-wide, so another thread's cycles wait for the block's end too)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()
            gc.unfreeze()
            gc.enable()
