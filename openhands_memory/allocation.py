"""Allocating many objects that live on: decoding a long view, rendering its messages,
parsing an import; and, for a caller that owns its process, the cyclic collector paused
meanwhile.

Python's cyclic collector runs whenever allocations outnumber deallocations by a threshold,
and each run walks the objects still tracked; a view of N events allocates objects that all
survive, so collection during the load walks the growing heap again and again. None of these
objects form cycles that need the collector, so it can be paused for the bulk work, and the
survivors then moved straight into the oldest generation (``gc.freeze`` then ``gc.unfreeze``:
two list splices, whatever their number). Left young, the first collections after the block
would walk every one of them twice on their way there.

The collector is the whole process's: pausing it holds back every other thread's collection
too, and the move changes when the oldest generation is walked next. So a library call does
neither unless the process's owner asked for it (``allow_collector_pauses``): the command
line does, and so do the importer's own child processes (``always=True``); an application
that embeds the library may, for long views. Its effect, measured: docs/performance.md.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

_allowed = False


def allow_collector_pauses(allowed: bool = True) -> None:
    """Let the library pause the cyclic collector while it builds a long view, renders its
    messages or imports (``collector_paused``), for this whole process: a decision for the
    process's owner (a command line, an application), never a library's. Off by default."""
    global _allowed
    _allowed = allowed


def collector_pauses_allowed() -> bool:
    return _allowed


@contextmanager
def collector_paused(*, always: bool = False) -> Iterator[None]:
    """No cyclic collection inside the block when the process's owner allowed it (or
    ``always``: a process the library itself started); nested blocks leave it to the
    outermost. Otherwise the block runs with the collector as the caller left it."""
    if not (_allowed or always):
        yield
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()
            gc.unfreeze()
            gc.enable()
