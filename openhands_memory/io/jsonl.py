"""Event dicts in files: JSON Lines (one event a line), a JSON list, or a single JSON object.

The dicts are this library's / the SDK's event JSON (``{"kind": "MessageEvent", …}``). A
Condensation may carry ``forgotten_ranges`` (ids in the conversation it was exported from):
imported into a new conversation, events keep their ids, so the ranges stay right.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Iterator

from ..events import Event
from .common import (
    MAX_EVENT_BYTES,
    ImportFailed,
    decode_utf8,
    load_json,
    open_regular,
    parse_event_dict,
    parse_event_json,
)

if TYPE_CHECKING:
    from ..conversation import Conversation


def first_char(text: str) -> str:
    stripped = text.lstrip("\ufeff \t\r\n")
    return stripped[:1]


def is_jsonl(text_head: str) -> bool:
    """Whether a text that opens with ``{`` is JSON Lines: its first line alone is a complete
    event object (a one-line ``{"history": [...]}`` document is not)."""
    from pydantic_core import from_json

    line = text_head.lstrip("\ufeff \t\r\n").split("\n", 1)[0]
    try:
        value = from_json(line.encode("utf-8", errors="replace"))
    except ValueError:
        return False
    return isinstance(value, dict) and "kind" in value


#: How much of a JSON Lines file is read at a time (its lines are split in memory: a
#: ``readline`` per line cost as much as the rest of reading).
READ_SIZE = 1 << 22


def numbered_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """Each line of the file (without its newline) with its number, from 1, streamed. A line
    longer than ``MAX_EVENT_BYTES`` is refused without being read whole."""
    label = str(path)
    with os.fdopen(open_regular(path), "rb", buffering=0) as f:
        number = 0
        rest = b""
        while chunk := f.read(READ_SIZE):
            lines = (rest + chunk if rest else chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                number += 1
                if len(line) > MAX_EVENT_BYTES:
                    raise ImportFailed(f"{label}:{number}", f"the line is longer than {MAX_EVENT_BYTES >> 20} MB")
                yield number, line
            if len(rest) > MAX_EVENT_BYTES:
                raise ImportFailed(f"{label}:{number + 1}", f"the line is longer than {MAX_EVENT_BYTES >> 20} MB")
        if rest:
            yield number + 1, rest


def event_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines (stripped; a byte order mark dropped) with their numbers."""
    for number, line in numbered_lines(path):
        line = line.strip()
        if not line:
            continue
        if number == 1 and line.startswith(b"\xef\xbb\xbf"):
            line = line[3:]
        yield number, line


def iter_jsonl(path: Path) -> Iterator[tuple[Event, str, str]]:
    """Each non-blank line's event, with ``path:line`` for errors and the line's text; streamed.

    Lines longer than ``MAX_EVENT_BYTES`` are refused without being read whole."""
    label = str(path)
    for number, line in event_lines(path):
        where = f"{label}:{number}"
        yield parse_event_json(line, where), where, line.decode()


def events_of_value(value: Any, where: str) -> list[tuple[Event, str]]:
    """The events a parsed JSON value holds: one event object, or a list of them."""
    if isinstance(value, dict):
        return [(parse_event_dict(value, where), where)]
    if isinstance(value, list):
        out = []
        for i, item in enumerate(value):
            at = f"{where}[{i}]"
            out.append((parse_event_dict(item, at), at))
        return out
    raise ImportFailed(where, f"expected an event object or a list of events, got {type(value).__name__}")


def parse_bytes(data: bytes, where: str) -> list[tuple[Event, str]]:
    """Events from bytes holding a JSON object, a JSON list, or JSON Lines (UTF-8)."""
    return parse_text(decode_utf8(data, where), where)


def parse_text(text: str, where: str) -> list[tuple[Event, str]]:
    """Events from text holding a JSON object, a JSON list, or JSON Lines."""
    head = first_char(text)
    if not head:
        raise ImportFailed(where, "no events in it (it is empty)")
    if head == "[" or (head == "{" and not is_jsonl(text)):
        return events_of_value(load_json(text.lstrip("\ufeff"), where), where)
    if head != "{":
        raise ImportFailed(where, "not JSON: expected an event object, a list of events, or JSON Lines")
    out = []
    for number, line in enumerate(text.lstrip("\ufeff").split("\n"), 1):
        if line.strip():
            at = f"{where}:{number}"
            if len(line) > MAX_EVENT_BYTES:
                raise ImportFailed(at, f"the line is longer than {MAX_EVENT_BYTES >> 20} MB")
            out.append((parse_event_json(line, at), at))
    return out


def write_jsonl(conversation: "Conversation", out: IO[str]) -> int:
    """Every event's JSON as stored, one a line, oldest first; an event whose parent is not
    the line before it (a history tree's branch) names it (``parent_id``), so that an import
    rebuilds the tree (HEAD is then the newest event: JSON Lines has no place for it).
    Returns the count."""
    from .sdk import _snapshot, _with_parent, event_rows

    snap = _snapshot(conversation)
    uids: dict[int, str] = {}
    wanted = {p for p in snap.jumps.values() if p >= 0}
    n = 0
    for seq, uid, _kind, payload in event_rows(conversation, upto=snap.last):
        if seq in wanted:
            uids[seq] = uid
        parent = snap.jumps.get(seq)
        if parent is not None:
            payload = _with_parent(payload, "__root__" if parent < 0 else uids[parent])
        out.write(payload)
        out.write("\n")
        n += 1
    return n
