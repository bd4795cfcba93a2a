"""The OpenHands SDK's conversation folder, read and written.

    <conversation folder>/
      base_state.json                 the conversation's state (we read its "id" and HEAD)
      events/
        event-00000-<event id>.json   one event per file, in the SDK's JSON shape
        event-00001-<event id>.json
        .eventlog-len-<N>.marker      bookkeeping files, ignored on import

Import keeps the SDK's event ids as external ids (``Event.id``; the store's ``uid``) and
gives each event the id in its file name (the SDK's log index), so ids are 0, 1, 2, … as the
store wants. A folder whose indexes have a gap or a repeat is refused, naming the files: the
SDK itself would silently stop reading at a gap.

History trees (``storage/tree.py``): each event keeps the parent its ``parent_id`` names (a
parent must be an earlier event of the folder; one that is not is refused, naming the file),
and HEAD is set from ``base_state.json``'s ``leaf_event_id`` and ``head_is_empty``, in the
import's transaction, so that ``conv.view()`` is the path the SDK would resume on. A leaf that
names no event of the folder is said in a note, and HEAD stays at the newest event.

Export writes the same layout, so that the SDK's view of the folder (``View.from_events``)
equals ours:

* Our own Condensations forget id *ranges*; the SDK knows only ``forgotten_event_ids``, so
  each recorded range becomes the external ids of every event in it, the
  ``forgotten_ranges`` key is dropped and ``llm_response_id`` (required by the SDK) is set.
  Importing the folder again therefore records the very same ranges.
* In our view a new summary replaces the previous one; the SDK keeps a summary until a
  condensation forgets ``<its condensation id>-summary``. So a condensation of ours that
  brings a summary also forgets the previous summary's id.
* Imported SDK Condensations are written back byte for byte.
* Where our tree has a parent the SDK could not infer (an event whose parent is not the row
  before it, and whose JSON names none: appended here after ``navigate``), the event's
  ``parent_id`` is written: the parent's id, or ``"__root__"`` for a new root. A
  Condensation's previous summary is the one in force on its own path.
* ``base_state.json``'s ``leaf_event_id`` and ``head_is_empty`` are our HEAD (an empty HEAD:
  no leaf, ``head_is_empty`` true).

``base_state.json`` is what the SDK resumes a conversation from (``ConversationState``: the
id, a UUID; the agent with its tools; the workspace). An imported one is written back as it
was. Otherwise (a conversation appended here or imported from JSONL or a legacy trajectory)
we write the least the SDK accepts: a UUID (the conversation's id if it is one, else a UUID
derived from it), an ``Agent`` listing the tools the history used, a local workspace. The
model there is a placeholder, so the export says plainly that resuming needs the caller's
own Agent (whose tools must include those).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from .. import ranges
from ..files import sibling
from ..storage import END, tree
from ..storage.codec import check_size
from ..events import Event
from .common import (MAX_EVENT_BYTES, ImportFailed, load_json, open_nonblocking, parse_event_json, read_bounded,
                     refuse_irregular)

if TYPE_CHECKING:
    from ..conversation import Conversation, Writer
    from .common import ImportResult

EVENTS_DIR = "events"
BASE_STATE = "base_state.json"
FILE_NAME = "event-{index:05d}-{id}.json"
# The SDK accepts only hex-and-dash ids in file names; we read any id, and say when we
# write one the SDK will not find.
_SDK_NAME = re.compile(r"^event-(?P<index>\d{5,})-(?P<id>[0-9a-fA-F\-]{8,})\.json$")
# Kinds this library knows that the SDK does not (legacy imports, pins).
NON_SDK_KINDS = frozenset({"RecallAction", "RecallObservation", "AgentStateChangedEvent", "NullEvent", "PinEvent"})


@dataclass
class SdkFolder:
    root: Path
    events_dir: Path
    files: list[str]  # file names, in index order (index i at position i)
    base_state: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def conversation_id(self) -> str:
        """The id we exported it under (a tag in ``base_state.json``), else ``base_state.json``'s
        id, else the folder's name."""
        if self.base_state is not None:
            tags = self.base_state.get("tags")
            if isinstance(tags, dict) and isinstance(tags.get(ID_TAG), str) and tags[ID_TAG]:
                return tags[ID_TAG]
            cid = self.base_state.get("id")
            if isinstance(cid, str) and cid:
                return cid
        return self.root.name

    @property
    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"imported_from": {"format": "openhands", "path": str(self.root.resolve())}}
        if self.base_state is not None:
            meta["openhands"] = {"base_state": self.base_state}
        return meta


def is_event_dir(path: Path) -> bool:
    try:
        return any(n.startswith("event-") and n.endswith(".json") for n in os.listdir(path))
    except OSError:
        return False


def _folders(path: Path) -> tuple[Path, Path]:
    """(the conversation folder, its events folder), or ``ImportFailed`` when ``path`` is
    neither a conversation folder nor its events folder."""
    if (path / EVENTS_DIR).is_dir():
        return path, path / EVENTS_DIR
    if is_event_dir(path):  # pointed at the events folder itself
        return path.parent, path
    raise ImportFailed(
        path,
        "not an OpenHands conversation folder: it has no events/ folder holding "
        "event-NNNNN-<id>.json files",
    )


def _event_names(events_dir: Path) -> list[str]:
    # Not .eventlog.lock, .eventlog-len-N.marker, editor leftovers.
    return [n for n in os.listdir(events_dir) if n.startswith("event-") and n.endswith(".json")]


def check_folder(path: Path) -> None:
    """``ImportFailed`` when ``path`` is no conversation folder (nothing listed or read)."""
    _folders(path)


def count_files(path: Path) -> int:
    """How many event files a conversation folder holds, from their names alone (a progress
    bar's length; ``scan`` judges them). ``ImportFailed`` when it is no conversation folder."""
    return len(_event_names(_folders(path)[1]))


@dataclass
class Listing:
    """A conversation folder's event file names as listed, not judged yet (``judge``)."""

    root: Path
    events_dir: Path
    names: list[str]


def list_events(path: Path) -> Listing:
    """``ImportFailed`` when ``path`` is no conversation folder (or its events folder)."""
    root, events_dir = _folders(path)
    return Listing(root, events_dir, _event_names(events_dir))


def scan(path: Path) -> SdkFolder:
    """Judge a folder from its file names (and base_state.json) without reading any event."""
    return judge(list_events(path))


def judge(listing: Listing) -> SdkFolder:
    """The folder ``listing`` lists, its files in index order; ``ImportFailed`` naming a file
    whose name the SDK does not write, an index used twice, or a gap."""
    root, events_dir, names = listing.root, listing.events_dir, listing.names
    # Each name in the place its index says (no sort: a million names took 3 s with one);
    # a gap or a repeat leaves a place empty, and the sorted list below says where.
    files: list[str | None] = [None] * len(names)
    placed = True
    for name in names:
        dash = name.find("-", 6)
        digits = name[6:dash]
        if dash < 11 or not digits.isdigit() or dash + 1 >= len(name) - 5:
            raise ImportFailed(events_dir / name, "not an event file name the SDK writes (event-NNNNN-<id>.json)")
        index = int(digits)
        if index < len(files) and files[index] is None:
            files[index] = name
        else:
            placed = False
    if placed:
        return _with_state(SdkFolder(root, events_dir, files))  # type: ignore[arg-type]
    indexed = sorted((int(name[6:name.find("-", 6)]), name) for name in names)
    if [i for i, _ in indexed] != list(range(len(indexed))):  # a gap or a repeat: say where
        for position, (index, name) in enumerate(indexed):
            if index == position:
                continue
            if index < position:  # the same index twice
                raise ImportFailed(events_dir / name, f"index {index:05d} is also used by {indexed[position - 1][1]}")
            after = f"after {indexed[position - 1][1]}" if position else "at the start"
            raise ImportFailed(events_dir, f"event file {position:05d} is missing ({after}); the log has a gap")
    return _with_state(SdkFolder(root, events_dir, [name for _, name in indexed]))


def _with_state(folder: SdkFolder) -> SdkFolder:
    """``folder`` with its ``base_state.json``, when it has one."""
    state_path = folder.root / BASE_STATE
    if state_path.is_file():
        state = load_json(read_bounded(state_path, MAX_EVENT_BYTES), state_path)
        if not isinstance(state, dict):
            raise ImportFailed(state_path, f"must be a JSON object, got {type(state).__name__}")
        folder.base_state = state
    return folder


#: How many files are opened before the one being read (see ``_read_in``).
AHEAD = 128
_FIRST_READ = 1 << 14  # an event file's bytes are read in one call up to this size


def _read_files(events_dir: str, names: list[str], paths: list[str]) -> list[bytes | ImportFailed]:
    """Each file's bytes (or why it cannot be read, naming its entry of ``paths``). Plain
    system calls, each file opened by its name in the folder held open: for a small file
    Python's buffered reader costs more than the read. A file that is not a regular file (a
    link to ``/dev/zero``, a pipe) or holds more than ``MAX_EVENT_BYTES`` is refused."""
    try:
        folder = os.open(events_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as e:
        raise ImportFailed(events_dir, f"cannot read it: {e.strerror}") from None
    try:
        return _read_in(folder, names, paths)
    finally:
        os.close(folder)


def _read_in(folder: int, names: list[str], paths: list[str]) -> list[bytes | ImportFailed]:
    if _cached(folder, names):
        return [_read_one(folder, name, path) for name, path in zip(names, paths)]
    # Not in the page cache: each file is opened ``AHEAD`` files before it is read, and the
    # system told it will be read (POSIX_FADV_WILLNEED), so that the disk is sent many
    # requests at once, not one at a time (a million files cold: two to three times faster
    # here). Where the cache holds the files, the advice is left out: it and the deque cost
    # 0.5 us a file, a tenth of reading it.
    ahead: deque[int | ImportFailed] = deque()
    try:
        for name, path in zip(names[:AHEAD], paths[:AHEAD]):
            ahead.append(_open_advised(folder, name, path))
        out: list[bytes | ImportFailed] = []
        for k, path in enumerate(paths):
            if k + AHEAD < len(names):
                ahead.append(_open_advised(folder, names[k + AHEAD], paths[k + AHEAD]))
            fd = ahead.popleft()
            out.append(fd if isinstance(fd, ImportFailed) else _read_closing(fd, path))
        return out
    finally:
        for fd in ahead:
            if not isinstance(fd, ImportFailed):
                os.close(fd)


def _cached(folder: int, names: list[str]) -> bool:
    """Whether the page cache holds the first and the last of these files (a read that may
    not wait for the disk, ``RWF_NOWAIT``, gets their first byte). False when the system
    cannot say (no such flag: macOS; a file system that does not take it)."""
    nowait = getattr(os, "RWF_NOWAIT", None)
    if nowait is None or not names:
        return False
    probe = bytearray(1)
    for name in {names[0], names[-1]}:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK, dir_fd=folder)
        except OSError:
            return False
        try:
            os.preadv(fd, [probe], 0, nowait)
        except OSError:  # EAGAIN: it would wait; a FIFO, a folder: the reading names them
            return False
        finally:
            os.close(fd)
    return True


def _read_one(folder: int, name: str, path: str) -> bytes | ImportFailed:
    fd = _open(folder, name, path)
    return fd if isinstance(fd, ImportFailed) else _read_closing(fd, path)


def _open_advised(folder: int, name: str, path: str) -> int | ImportFailed:
    fd = _open(folder, name, path)
    if not isinstance(fd, ImportFailed):
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        except (OSError, AttributeError):  # advice only (no such call on macOS)
            pass
    return fd


def _open(folder: int, name: str, path: str) -> int | ImportFailed:
    try:
        return open_nonblocking(path, name=name, dir_fd=folder)
    except ImportFailed as e:
        return e


def _read_closing(fd: int, path: str) -> bytes | ImportFailed:
    try:
        return _read_open(fd, path)
    except ImportFailed as e:
        return e
    finally:
        os.close(fd)


def _read_open(fd: int, path: str) -> bytes:
    """The bytes of the file ``fd`` (opened with ``open_nonblocking``), refused unless it is
    a regular file. Whether it is one is asked (``fstat``, 0.9 us: a fifth of reading an
    event's file) only when the first read leaves it in doubt: a FIFO without a writer reads
    as empty, a device such as ``/dev/zero`` fills the buffer, a folder refuses the read.
    Whatever gives a short read that holds bytes is read no further: at worst a FIFO's few
    bytes are taken for the file's."""
    try:
        data = os.read(fd, _FIRST_READ)
    except OSError as e:
        refuse_irregular(fd, path)
        raise ImportFailed(path, f"cannot read it: {e.strerror}") from None
    if 0 < len(data) < _FIRST_READ:
        return data
    refuse_irregular(fd, path)
    if not data:
        return data
    # a big event: read the rest, up to the bound
    parts, total = [data], len(data)
    try:
        while total <= MAX_EVENT_BYTES and (chunk := os.read(fd, 1 << 20)):
            parts.append(chunk)
            total += len(chunk)
    except OSError as e:
        raise ImportFailed(path, f"cannot read it: {e.strerror}") from None
    if total > MAX_EVENT_BYTES:
        raise ImportFailed(path, f"larger than the {MAX_EVENT_BYTES >> 20} MB an event may hold")
    return b"".join(parts)


def parse_file(path: str, name: str, data: bytes | ImportFailed) -> tuple[Event, str, str | None]:
    """(event, path, file text) of the event file ``name`` read as ``data`` (``read_raw``)."""
    if isinstance(data, ImportFailed):
        raise data
    event = parse_event_json(data, path)
    if event.id != file_id(name):
        raise ImportFailed(path, f"the file name says event id {file_id(name)!r} but the file holds {event.id!r}")
    # The SDK writes compact JSON, kept as the payload; a reformatted file is serialized anew.
    return event, path, data.decode() if b"\n" not in data else None


def file_id(name: str) -> str:
    """The event id an event file's name holds (event-NNNNN-<id>.json)."""
    return name[name.index("-", 6) + 1 : -5]


def batches(folder: SdkFolder, size: int) -> Iterator[list[tuple[Event, str, str | None]]]:
    """The events, ``size`` files at a time, in index order: (event, path, file text). An
    event whose ``parent_id`` names no earlier event of the folder is refused, naming its file
    (the SDK could not walk that branch to its root either)."""
    base = str(folder.events_dir)
    seen: set[str] | None = set()
    for start in range(0, len(folder.files), size):
        batch = read_batch(base, folder.files[start : start + size])
        seen = check_parents(batch, seen)
        yield batch


def read_batch(events_dir: str, names: list[str]) -> list[tuple[Event, str, str | None]]:
    """(event, path, file text) of each of these event files, in order."""
    return [parse_file(*item) for item in read_raw(events_dir, names)]


def read_raw(events_dir: str, names: list[str]) -> list[tuple[str, str, bytes | ImportFailed]]:
    """(path, name, bytes or why they cannot be read) of each of these event files, in order."""
    prefix = os.path.join(events_dir, "")  # (os.path.join for each file: 0.4 us, a tenth of its read)
    paths = [prefix + n for n in names]
    return list(zip(paths, names, _read_files(events_dir, names, paths)))


def check_parents(batch: list[tuple[Any, ...]], seen: set[str] | None) -> set[str] | None:
    """Refuse the first ``(event, path, ...)`` of a batch whose ``parent_id`` is not in
    ``seen`` (the ids of the events before it), adding each id; returns what the next batch
    is judged by: None after an id that repeats, which the import refuses (``Checker``), so
    that no parent is judged after it."""
    if seen is None or not batch:
        return seen
    events = [item[0] for item in batch]
    ids = [e.id for e in events]
    first = events[0].parent_id
    # As the SDK writes a line: each event names the one before it, so only the first parent
    # is judged, and the ids go in at once (when one repeats, the loop below would have passed
    # every parent before it and judged none after it: the same outcome).
    if [e.parent_id for e in events[1:]] == ids[:-1] and (first is None or first == tree.ROOT_PARENT_ID
                                                          or first in seen):
        size = len(seen)
        seen.update(ids)
        return seen if len(seen) == size + len(ids) else None
    for item in batch:
        if seen is None:
            break
        event = item[0]
        parent = event.parent_id
        if parent is not None and parent != tree.ROOT_PARENT_ID and parent not in seen:
            raise ImportFailed(item[1], f"its parent_id {parent!r} is not an earlier event of the folder "
                                        "(the SDK writes a parent before its children)")
        if event.id in seen:
            seen = None
        else:
            seen.add(event.id)
    return seen


def set_head(w: "Writer", folder: SdkFolder, result: "ImportResult") -> None:
    """HEAD from the folder's ``base_state.json`` (``leaf_event_id``, ``head_is_empty``), in
    the import's transaction once every event is written (``w``: its writing context). A leaf
    that names no event of the folder is said in a note; HEAD then stays at the newest event."""
    state = folder.base_state
    if not state:
        return
    leaf = state.get("leaf_event_id")
    if not state.get("head_is_empty") and isinstance(leaf, str):
        if not w.db.seqs_of(w.conversation_id, END, [leaf]):
            result.notes.append(
                f"base_state.json's leaf_event_id {leaf!r} names no event of the folder: HEAD is the newest event"
            )
            return
    if tree.head_from_base_state(w.db, w.conversation_id, json.dumps(state)):
        w.branched = True


# --- export ----------------------------------------------------------------------------------


@dataclass
class ExportResult:
    path: str
    events: int = 0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "events": self.events, "notes": self.notes}


@dataclass
class _Snapshot:
    """What an export reads before the events, in one read: each condensation's ranges, the
    last id (rows appended meanwhile are left out), the tree's parents and HEAD."""

    runs: dict[int, list[ranges.Run]]
    last: int
    jumps: dict[int, int]  # id -> its parent, where that is not the row before (-1: a new root)
    empty_head: bool
    leaf: int | None


def _snapshot(conversation: "Conversation") -> _Snapshot:
    runs: dict[int, list[ranges.Run]] = {}
    cid = conversation.id
    with conversation.store.reading() as db:
        for cond, start, end in db.forgotten_ranges(cid):
            runs.setdefault(cond, []).append((start, end))
        return _Snapshot(runs, db.last_seq(cid), dict(db.jumps(cid)), db.head(cid) == tree.EMPTY,
                         tree.leaf(db, cid))


def _with_parent(payload: str, parent_id: str) -> str:
    """An event's JSON naming its parent, unless it names one already (the same one: the tree
    was built from it)."""
    data = json.loads(payload)
    if data.get("parent_id") is not None:
        return payload
    data["parent_id"] = parent_id
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def event_rows(
    conversation: "Conversation", page: int = 2000, upto: int = END
) -> Iterator[tuple[int, str, str, str]]:
    """(id, uid, kind, payload) of every event (up to id ``upto``), oldest first, a page per
    short read."""
    cursor = 0
    while True:
        with conversation.store.reading() as db:
            rows = db.event_page(conversation.id, cursor, upto + 1 if upto < END else END, page,
                                 columns="id, uid, kind, payload")
        for seq, uid, kind, payload in rows:
            # Written before the limit was kept on every write: an import could not read it back.
            check_size(payload, f"event {seq} ({kind}, {uid})", "nothing was exported")
        yield from rows
        if len(rows) < page:
            return
        cursor = rows[-1][0] + 1


def sdk_condensation(
    payload: str, seq: int, runs: list[ranges.Run], uids: list[str], previous_summary: str | None = None
) -> str:
    """A stored Condensation's JSON as the SDK writes it (see the module's docstring).

    ``previous_summary``: the id of the summary in the view before this condensation
    (``<condensation id>-summary``); a condensation of ours that brings a summary forgets it.
    """
    data = json.loads(payload)
    if "forgotten_ranges" not in data and data.get("llm_response_id"):
        return payload  # already in the SDK's shape (imported from a folder): keep its bytes
    data.pop("forgotten_ranges", None)
    ids = list(data.get("forgotten_event_ids") or [])
    if previous_summary and data.get("summary") is not None and data.get("summary_offset") is not None:
        if previous_summary not in ids:
            ids.append(previous_summary)
    known = set(ids)
    for s, e in ranges.merge(runs):
        for i in range(s, e + 1):
            if uids[i] not in known:
                ids.append(uids[i])
                known.add(uids[i])
    data["forgotten_event_ids"] = ids
    if not data.get("llm_response_id"):
        data["llm_response_id"] = f"openhands-memory-condensation-{seq}"
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _require_sdk_tools(target: Path, seq: int, payload: str) -> None:
    """Refuse a SystemPromptEvent whose tools the SDK cannot load: it reads each as a
    ToolDefinition, which names its class (``kind``); a tool given as a name and a schema
    (a legacy trajectory's, or one written by hand) has none, and no class can be made up."""
    for tool in json.loads(payload).get("tools") or []:
        if not (isinstance(tool, dict) and isinstance(tool.get("kind"), str)):
            name = tool.get("name") or tool.get("title") if isinstance(tool, dict) else None
            raise ImportFailed(target, f"event {seq} (SystemPromptEvent) lists the tool {name or tool!r} without the "
                                       "SDK's ToolDefinition kind, so the OpenHands SDK could not load the folder; "
                                       "nothing was written")


def export_folder(conversation: "Conversation", target: Path) -> ExportResult:
    """Write ``conversation`` as an SDK conversation folder at ``target`` (new or empty).

    The folder is assembled beside ``target`` and renamed into place at the end, so a
    failure never leaves half a conversation behind.
    """
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ImportFailed(target, "already exists and is not an empty folder; choose a new one")
    parent = target.resolve().parent
    if not parent.is_dir():
        raise ImportFailed(target, f"folder {parent} does not exist")
    result = ExportResult(str(target))
    snap = _snapshot(conversation)
    work = sibling(parent / target.name, "export")  # (a name that fits, however long target's is)
    work.mkdir()
    try:
        events_dir = work / EVENTS_DIR
        events_dir.mkdir()
        uids: list[str] = []
        foreign_kinds: set[str] = set()
        tools: dict[str, None] = {}
        odd_names = 0
        # The summary our view shows right after each event, on that event's own path.
        summary_after: list[str | None] = []
        for seq, uid, kind, payload in event_rows(conversation, upto=snap.last):
            uids.append(uid)
            parent = snap.jumps.get(seq, seq - 1)
            summary_id = summary_after[parent] if parent >= 0 else None
            if kind == "Condensation":
                written = sdk_condensation(payload, seq, snap.runs.get(seq, []), uids, summary_id)
                data = json.loads(payload)
                if data.get("summary") is not None and data.get("summary_offset") is not None:
                    summary_id = f"{uid}-summary"
                payload = written
            elif kind == "ActionEvent":
                tools.setdefault(json.loads(payload).get("tool_name", ""), None)
            elif kind == "SystemPromptEvent":
                _require_sdk_tools(target, seq, payload)
            if seq in snap.jumps:  # a parent the SDK could not infer from the order
                payload = _with_parent(payload, uids[parent] if parent >= 0 else tree.ROOT_PARENT_ID)
            summary_after.append(summary_id)
            if kind in NON_SDK_KINDS:
                foreign_kinds.add(kind)
            name = FILE_NAME.format(index=seq, id=uid)
            if _SDK_NAME.match(name) is None:
                odd_names += 1
            with open(events_dir / name, "w", encoding="utf-8") as f:
                f.write(payload)
        (events_dir / f".eventlog-len-{len(uids)}.marker").touch()
        state = dict((conversation.metadata.get("openhands") or {}).get("base_state") or {})
        if state:
            state.setdefault("id", conversation.id)
        else:
            state = resumable_state(conversation.id, [t for t in tools if t])
            result.notes.append(resume_note(conversation.id, state))
        # HEAD, as the SDK keeps it (``ConversationState.leaf_event_id``, ``head_is_empty``).
        state["leaf_event_id"] = uids[snap.leaf] if snap.leaf is not None else None
        state["head_is_empty"] = snap.empty_head
        (work / BASE_STATE).write_text(json.dumps(state, ensure_ascii=False, separators=(",", ":")))
        if target.exists():
            target.rmdir()
        os.replace(work, target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    result.events = len(uids)
    if foreign_kinds:
        result.notes.append(
            f"kinds the OpenHands SDK does not know were written as they are: {', '.join(sorted(foreign_kinds))}"
        )
    if odd_names:
        result.notes.append(
            f"{odd_names} event id(s) are not hex UUIDs: the SDK skips such files "
            "(openhands-memory imports them)"
        )
    return result


# The SDK's built-in tools, which every Agent has unless told otherwise (include_default_tools).
BUILTIN_TOOLS = frozenset({"finish", "think"})
ID_TAG = "openhandsmemoryid"  # our conversation id, when the SDK's (a UUID) differs
_UUID_NAMESPACE = uuid.UUID("5b0f5d1e-6f0e-4c4b-9a51-0e2a4f6d7c11")


def sdk_conversation_id(conversation_id: str) -> str:
    """The SDK's conversation ids are UUIDs: ours if it is one, else one derived from it."""
    try:
        return str(uuid.UUID(conversation_id))
    except ValueError:
        return str(uuid.uuid5(_UUID_NAMESPACE, conversation_id))


def resumable_state(conversation_id: str, tools: list[str]) -> dict[str, Any]:
    """The least ``base_state.json`` the SDK's ``ConversationState`` accepts on resume."""
    return {
        "id": sdk_conversation_id(conversation_id),
        "agent": {
            "kind": "Agent",
            "llm": {"model": "openhands-memory/unknown-model", "usage_id": "agent"},
            "tools": [{"name": t, "params": {}} for t in tools if t not in BUILTIN_TOOLS],
        },
        "workspace": {"kind": "LocalWorkspace", "working_dir": "."},
        "execution_status": "idle",
        # The SDK's tag keys are lowercase alphanumeric; values up to 256 characters.
        **({"tags": {ID_TAG: conversation_id}} if len(conversation_id) <= 256 else {}),
    }


def resume_note(conversation_id: str, state: dict[str, Any]) -> str:
    tools = ", ".join(t["name"] for t in state["agent"]["tools"]) or "none"
    renamed = "" if state["id"] == conversation_id else f" under the id {state['id']} (the SDK needs a UUID)"
    return (
        "base_state.json was not imported with this conversation, so it was written by openhands-memory"
        f"{renamed}: the SDK can resume it, but only with an Agent you pass in (its model here is a "
        f"placeholder) whose tools include: {tools}"
    )
