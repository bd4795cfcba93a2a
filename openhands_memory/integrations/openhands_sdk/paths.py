"""The paths the OpenHands SDK asks its FileStore for, and what each one is.

An SDK conversation's store holds, relative to the conversation::

    base_state.json                      the conversation's state
    events/event-00012-<id>.json         event 12 (file name: index, then the event's id: a
                                         UUID unless the caller gave the event another)
    events/.eventlog-len-13.marker       "the log has 13 events" (a hint for other writers)
    events/.eventlog.lock                the lock the log appends under
    anything else                        files of tools or of later SDK versions

The names mirror ``openhands.sdk.conversation.persistence_const`` and ``event_store``; this
module only reads them, so it does not import the SDK.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

BASE_STATE = "base_state.json"
EVENTS_DIR = "events"
EVENT_NAME = "event-{index:05d}-{uid}.json"
# Any id, as the SDK's writer names the file (EVENT_FILE_PATTERN), not only the UUIDs its
# reader lists (EVENT_NAME_RE): the SDK counts every event-*.json as an event when it checks
# for other writers, so the length marker must count those events too.
_EVENT = re.compile(r"^event-(?P<index>\d{5,})-(?P<uid>[^/]+)\.json$")
_MARKER = re.compile(r"^\.eventlog-len-(?P<length>\d+)\.marker$")
_LOCK = ".eventlog.lock"
# The SDK asks for event files by this exact spelling, once per event on a resume: matched
# before any normalizing.
_EVENT_PATH = re.compile(r"^events/event-(?P<index>\d{5,})-(?P<uid>[^/]+)\.json$")


@dataclass(frozen=True)
class Root:
    """The conversation itself ("" or "/")."""


@dataclass(frozen=True)
class BaseState:
    pass


@dataclass(frozen=True)
class EventsDir:
    pass


@dataclass(frozen=True)
class EventFile:
    index: int
    uid: str


@dataclass(frozen=True)
class LengthMarker:
    length: int


@dataclass(frozen=True)
class LockFile:
    path: str


@dataclass(frozen=True)
class OtherFile:
    path: str


Kind = Root | BaseState | EventsDir | EventFile | LengthMarker | LockFile | OtherFile


def normalize(path: str) -> str:
    """``path`` relative to the conversation, with "/" separators and no "." parts; a path that
    climbs out of the conversation is refused, as the SDK's LocalFileStore refuses it."""
    parts = path.replace("\\", "/").split("/")
    depth = 0
    for part in parts:
        depth += -1 if part == ".." else 0 if part in ("", ".") else 1
        if depth < 0:
            raise ValueError(f"path escapes the conversation: {path}")
    return posixpath.normpath("/" + "/".join(parts)).lstrip("/")


def classify(path: str) -> Kind:
    if m := _EVENT_PATH.match(path):
        return EventFile(int(m["index"]), m["uid"])
    clean = normalize(path)
    if clean == "":
        return Root()
    if clean == BASE_STATE:
        return BaseState()
    if clean == EVENTS_DIR:
        return EventsDir()
    folder, name = posixpath.split(clean)
    if folder == EVENTS_DIR:
        if m := _EVENT.match(name):
            return EventFile(int(m["index"]), m["uid"])
        if m := _MARKER.match(name):
            return LengthMarker(int(m["length"]))
    if name == _LOCK:
        return LockFile(clean)
    return OtherFile(clean)


def event_path(index: int, uid: str) -> str:
    return f"{EVENTS_DIR}/{EVENT_NAME.format(index=index, uid=uid)}"
