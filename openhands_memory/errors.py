"""The exceptions a user of the library can act on. Each message says what is wrong and what to do."""

from __future__ import annotations

from typing import Iterable


class OpenHandsMemoryError(Exception):
    """Base of every error this library raises on purpose."""


class MalformedEvent(OpenHandsMemoryError, ValueError):
    """An event payload is missing a field or has one of the wrong type."""


class UnknownEventKind(MalformedEvent):
    def __init__(self, kind: object, known: Iterable[str]):
        self.kind = kind
        super().__init__(f"unknown event kind {kind!r}; known kinds: {', '.join(sorted(known))}")


class ConversationNotFound(OpenHandsMemoryError, LookupError):
    def __init__(self, conversation_id: str):
        self.conversation_id = conversation_id
        super().__init__(f"no conversation with id {conversation_id!r} in this database")


class AmbiguousConversation(OpenHandsMemoryError, LookupError):
    def __init__(self, prefix: str, ids: list[str]):
        self.prefix, self.ids = prefix, ids
        shown = ", ".join(ids[:5]) + (", …" if len(ids) > 5 else "")
        super().__init__(f"{prefix!r} names more than one conversation: {shown}")


class ConversationExists(OpenHandsMemoryError):
    def __init__(self, conversation_id: str):
        self.conversation_id = conversation_id
        super().__init__(f"a conversation with id {conversation_id!r} already exists")


class EventNotFound(OpenHandsMemoryError, LookupError):
    def __init__(self, conversation_id: str, event_id: int):
        super().__init__(f"conversation {conversation_id!r} has no event {event_id}")


class DuplicateEventId(OpenHandsMemoryError):
    def __init__(self, conversation_id: str, uid: str):
        self.uid = uid
        super().__init__(
            f"conversation {conversation_id!r} already holds an event with external id {uid!r}"
        )


class SchemaError(OpenHandsMemoryError):
    """The database file's schema is not the one this version of the library uses."""


class SchemaTooOld(SchemaError):
    def __init__(self, path: str, found: str, head: str):
        self.found, self.head = found, head
        super().__init__(
            f"{path} uses schema revision {found}, older than this library's {head}; "
            f"run `openhands-memory migrate {path}` to upgrade it (a backup is made first)"
        )


class SchemaTooNew(SchemaError):
    def __init__(self, path: str, found: str):
        self.found = found
        super().__init__(
            f"{path} uses schema revision {found}, which this version of openhands-memory "
            "does not know: it was written by a newer version; upgrade openhands-memory"
        )


class NotOurDatabase(SchemaError):
    def __init__(self, path: str, why: str):
        super().__init__(f"{path} is not an openhands-memory database ({why}); it was left untouched")


class PostgresUnavailable(OpenHandsMemoryError):
    """A postgresql:// URL was given, and psycopg 3 is not installed."""

    def __init__(self, label: str):
        super().__init__(
            f"{label}: PostgreSQL needs psycopg 3; install it with `pip install 'openhands-memory[postgres]'`"
        )


class DatabaseUnreachable(OpenHandsMemoryError):
    """The PostgreSQL server refused the connection, or the database does not exist."""

    def __init__(self, label: str, why: str):
        super().__init__(f"{label}: cannot connect: {why}")


class ConcurrentCondensation(OpenHandsMemoryError):
    """Another condensation landed after the view this one was computed from."""


class ConfigError(OpenHandsMemoryError, ValueError):
    """A condenser or LLM configuration is invalid; the message names the key."""


class NoCondensationAvailable(OpenHandsMemoryError):
    """No valid cut exists in the view (for example one tool loop spans all of it)."""


class ReadOnlyViolation(OpenHandsMemoryError):
    """A statement given to the read-only SQL interface would change the database."""


class QueryError(OpenHandsMemoryError):
    """A statement given to the read-only SQL interface failed; the message says why."""


class QueryTimeout(QueryError, TimeoutError):
    """The statement ran past its time limit and was stopped."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        super().__init__(f"the query ran past its time limit of {seconds:g} s and was stopped")


class MultipleStatements(QueryError):
    """The read-only SQL interface runs one statement per call."""


class StorageFault(OpenHandsMemoryError):
    """The file system refused what a file needs (space, permission); the message says what
    became of the write. ``committed``: the write itself had committed (a checkpoint after it
    failed; the WAL holds it)."""

    committed: bool = False


class DiskFull(StorageFault):
    def __init__(self, path: str, outcome: str, *, committed: bool = False):
        self.path, self.committed = path, committed
        super().__init__(f"{path}: the disk is full; {outcome}")


class ReadOnlyPlace(StorageFault):
    def __init__(self, path: str, reason: str, outcome: str):
        self.path = path
        super().__init__(f"{path}: {reason}; {outcome}")


class BrokenLink(OpenHandsMemoryError):
    """The database path is a symbolic link that leads nowhere: a loop, or a missing target.
    Neither readers nor writers follow it (a writer would create a file the user did not
    name)."""

    def __init__(self, path: str, why: str):
        self.path = path
        super().__init__(f"{path} is {why}; nothing was read or written (give the real path, or fix the link)")
