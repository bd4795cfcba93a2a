"""Importing a path as one new conversation: find out what it holds, then write it atomically.

Accepted:

* an OpenHands SDK conversation folder (``events/event-NNNNN-<id>.json``, optional
  ``base_state.json``), or its ``events`` folder;
* a legacy OpenHands trajectory: a JSON list of V0 events (or an object whose ``history`` or
  ``trajectory`` key holds that list);
* JSON Lines of event dicts (ours or the SDK's), or a JSON list of them.

The conversation id defaults to ``base_state.json``'s id, else the folder's or the file's
name. A folder's events keep their parents (``parent_id``), and its HEAD is
``base_state.json``'s (``io/sdk.py``). Everything is written in one transaction: when any file
or line is bad, the error names it and the database is left as it was.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import jsonl, legacy, sdk
from . import parallel as _parallel  # (named so: ``parallel`` is import_path's switch)
from .. import limits
from ..allocation import collector_paused
from ..storage.session import chunks
from .common import (
    ImportFailed,
    ImportResult,
    Progress,
    load_json,
    open_regular,
    read_bounded,
    write_conversation,
)

if TYPE_CHECKING:
    from ..conversation import EventStore

CHUNK = 2000
_SNIFF = 1 << 16


def _read_head(path: Path) -> str:
    fd = open_regular(path)  # a device or a pipe is refused here, before any reading
    try:
        return os.read(fd, _SNIFF).decode("utf-8", errors="replace")
    except OSError as e:
        raise ImportFailed(path, f"cannot read it: {e.strerror}") from None
    finally:
        os.close(fd)


def detect(path: Path) -> str:
    """``openhands``, ``legacy``, ``jsonl`` or ``json`` (a list or object of event dicts)."""
    if not path.exists():
        raise ImportFailed(path, "no such file or folder")
    if path.is_dir():
        sdk.scan(path)  # raises, naming the folder, when it is not a conversation folder
        return "openhands"
    head = _read_head(path)
    first = jsonl.first_char(head)
    if not first:
        raise ImportFailed(path, "the file is empty")
    if first == "{" and jsonl.is_jsonl(head):
        return "jsonl"
    if first in "[{":
        return "json"  # legacy or not is decided once the whole file is parsed
    raise ImportFailed(
        path, "not an OpenHands conversation folder, a legacy trajectory (JSON list) or JSON Lines"
    )


def count_events(path: Path, *, count: bool = True) -> int | None:
    """About how many events an import of ``path`` will write, when cheap to know (for a
    progress bar): a folder's event files, a JSON Lines file's lines. ``ImportFailed`` when
    ``path`` is nothing an import takes. ``count=False``: the path judged, nothing counted
    (None): that lists a folder (0.5 s for a million files; the import lists it again) or
    reads a file whole (1 s at 2 GB)."""
    if path.is_dir():
        if not count:
            sdk.check_folder(path)
            return None
        return sdk.count_files(path)  # the import judges the names (``sdk.scan``): once
    if detect(path) != "jsonl" or not count:
        return None
    n, last = 0, b"\n"
    with os.fdopen(open_regular(path), "rb") as f:
        while chunk := f.read(1 << 20):
            n += chunk.count(b"\n")
            last = chunk[-1:]
    return n + (last != b"\n")


def _json_items(value: Any, path: Path) -> tuple[str, list[Any]]:
    """(format, items) of a whole-file JSON document."""
    if isinstance(value, dict):
        for key in ("history", "trajectory"):
            if isinstance(value.get(key), list):
                return _json_items(value[key], path)
        if "kind" in value:
            return "json", [value]
        raise ImportFailed(path, "a JSON object here must be an event (with 'kind') or hold a 'history' list")
    if not isinstance(value, list):
        raise ImportFailed(path, f"expected a JSON list of events, got {type(value).__name__}")
    if value and legacy.looks_legacy(value[0]):
        return "legacy", value
    return "json", value


def import_path(
    store: "EventStore",
    path: str | Path,
    conversation_id: str | None = None,
    *,
    progress: Progress | None = None,
    chunk: int = CHUNK,
    parallel: bool | None = None,
) -> ImportResult:
    """Import ``path`` into ``store`` as a new conversation; see the module's docstring.
    ``parallel``: parse the input in a child process while this one writes (``io/parallel.py``);
    None: when it is large enough to pay for the child's start (an SDK folder or a JSON Lines
    file; the other formats are read whole first)."""
    with collector_paused():
        return _import(store, Path(path), conversation_id, progress, chunk, parallel)


def _import(
    store: "EventStore", path: Path, conversation_id: str | None, progress: Progress | None, chunk: int,
    parallel: bool | None = None,
) -> ImportResult:
    if path.is_dir():
        listing = sdk.list_events(path)
        in_children = parallel or (parallel is None and len(listing.names) >= _parallel.PARALLEL_EVENTS
                                   and _parallel.usable())
        # The children start while the names are judged, and are stopped however this ends.
        with _parallel.Parsers() if in_children else nullcontext() as parsers:
            folder = sdk.judge(listing)
            cid = limits.conversation_id(conversation_id if conversation_id is not None else folder.conversation_id)
            result = ImportResult(cid, "openhands", str(path))
            if parsers is not None:
                read: Any = _parallel.batches({"format": "openhands", "events_dir": str(folder.events_dir),
                                               "files": folder.files, "conversation_id": cid, "chunk": chunk},
                                              parsers)
            else:
                read = sdk.batches(folder, chunk)
            return write_conversation(store, cid, folder.metadata, read, result, progress,
                                      finish=lambda w: sdk.set_head(w, folder, result))
    kind = detect(path)
    cid = limits.conversation_id(conversation_id if conversation_id is not None else path.stem)
    meta: dict[str, Any] = {"imported_from": {"format": kind, "path": str(path.resolve())}}
    if kind == "jsonl":
        result = ImportResult(cid, "jsonl", str(path))
        if parallel or (parallel is None and path.stat().st_size >= _parallel.PARALLEL_BYTES and _parallel.usable()):
            read = _parallel.batches({"format": "jsonl", "path": str(path), "conversation_id": cid, "chunk": chunk})
        else:
            read = chunks(jsonl.iter_jsonl(path), chunk)
        return write_conversation(store, cid, meta, read, result, progress)
    value = load_json(read_bounded(path), path)
    fmt, items = _json_items(value, path)
    meta["imported_from"]["format"] = fmt
    result = ImportResult(cid, fmt, str(path))
    if fmt == "legacy":
        events = legacy.convert(items, str(path))
        located = [(e, f"{path} (legacy id {e.id})") for e in events]
        result.notes.append("legacy events were mapped onto this library's kinds (see openhands_memory.io.legacy)")
    else:
        located = jsonl.events_of_value(items, str(path))
    return write_conversation(store, cid, meta, chunks(located, chunk), result, progress)
