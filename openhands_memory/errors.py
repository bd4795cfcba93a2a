"""The exceptions a user of the library can act on. Each message says what is wrong and what to do."""

from __future__ import annotations

from typing import Iterable


class OpenHandsMemoryError(Exception):
    """Base of every error this library raises on purpose."""


#: How many characters of a value a message shows (a hostile value may be megabytes).
SHOWN_CHARS = 60


def shown(value: str, limit: int = SHOWN_CHARS) -> str:
    """``value`` as a one-line message shows it: quoted and escaped (a newline, a NUL, a lone
    surrogate as ``\\n``, ``\\x00``, ``\\ud800``), cut in the middle past ``limit`` characters
    with how long it was."""
    if len(value) > limit:
        return f"{value[: limit * 2 // 3] + '…' + value[-(limit // 3):]!r} ({len(value):,} characters)"
    return repr(value)


class MalformedEvent(OpenHandsMemoryError, ValueError):
    """An event payload is missing a field or has one of the wrong type."""


class EventTooLarge(OpenHandsMemoryError, ValueError):
    """An event's JSON is larger than ``storage.codec.MAX_EVENT_BYTES``: it is never written, so
    that everything stored can be exported and imported again."""

    def __init__(self, what: str, size: int, limit: int, done: str = "it was not written"):
        self.size, self.limit = size, limit
        super().__init__(f"{what} is {size:,} bytes of JSON, more than the {limit:,} bytes ({limit >> 20} MB) "
                         f"an event may hold; {done}")


class UnknownEventKind(MalformedEvent):
    def __init__(self, kind: object, known: Iterable[str]):
        self.kind = kind
        super().__init__(f"unknown event kind {kind!r}; known kinds: {', '.join(sorted(known))}")


class ConversationNotFound(OpenHandsMemoryError, LookupError):
    def __init__(self, conversation_id: str):
        self.conversation_id = conversation_id
        super().__init__(f"no conversation with id {shown(conversation_id)} in this database")


class AmbiguousConversation(OpenHandsMemoryError, LookupError):
    def __init__(self, prefix: str, ids: list[str]):
        self.prefix, self.ids = prefix, ids
        shown = ", ".join(ids[:5]) + (", …" if len(ids) > 5 else "")
        super().__init__(f"{prefix!r} names more than one conversation: {shown}")


class BadConversationId(OpenHandsMemoryError, ValueError):
    """A new conversation's id breaks the rule every new id keeps (``limits.py``)."""

    def __init__(self, conversation_id: str, why: str):
        self.conversation_id = conversation_id
        super().__init__(f"{shown(conversation_id)} cannot be a conversation's id: {why}; nothing was written")


class ConversationExists(OpenHandsMemoryError):
    def __init__(self, conversation_id: str):
        self.conversation_id = conversation_id
        super().__init__(f"a conversation with id {shown(conversation_id)} already exists")


class EventNotFound(OpenHandsMemoryError, LookupError):
    def __init__(self, conversation_id: str, event_id: int):
        super().__init__(f"conversation {shown(conversation_id)} has no event {event_id}")


class UnstorableIdentifier(MalformedEvent):
    """An event's id, tool call id, tool name, response id or parent id holds a NUL
    character, which PostgreSQL cannot keep in a column (see ``storage/codec.py``)."""

    def __init__(self, what: str, field: str, value: str, done: str = "it was not written"):
        self.field, self.value = field, value
        super().__init__(f"{what}: its {field} {shown(value)} holds a NUL character (U+0000), which no "
                         f"identifier may hold; {done}")


class MalformedChatItem(MalformedEvent):
    """A chat message or Responses API item given to ``chat.ChatHistory`` that claims a shape
    (a role, a ``type``) and lacks what that shape needs, or that is not JSON."""

    def __init__(self, position: int, what: str):
        self.position = position
        super().__init__(f"item {position}: {what}; nothing was written")


class CountOutOfRange(OpenHandsMemoryError, ValueError):
    """A count given to the library (a limit, a window, a budget) is not a whole number within
    its bounds (``limits.py``)."""


class UnknownParent(MalformedEvent):
    """An event names a parent (the SDK's ``parent_id``) that its conversation does not hold."""

    def __init__(self, conversation_id: str, uid: str, parent: str):
        self.uid, self.parent = uid, parent
        super().__init__(
            f"event {uid} names parent {parent!r}, which is not an event of conversation "
            f"{conversation_id!r} (a parent must be appended before its children); nothing was written"
        )


class IngestRefused(OpenHandsMemoryError, ValueError):
    """What an OpenHands agent server sent cannot be stored as it is (``io/agent_server.py``);
    nothing of it was stored. ``reason``: "malformed", "unknown_kind", "too_large" or
    "bad_conversation" (the receiver answers each with its own status)."""

    def __init__(self, reason: str, message: str):
        self.reason = reason
        super().__init__(f"{message}; nothing of the batch was stored")


class ReceiverStopping(OpenHandsMemoryError):
    """``serve --ingest`` is stopping: its store is closed, and a write that comes after (a
    backfill's page) is refused rather than opening it again."""

    def __init__(self) -> None:
        super().__init__("the receiver is stopping: nothing more is written")


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


class SeveralRevisions(SchemaError):
    """``alembic_version`` holds more than one row: which schema the database has is unknown."""

    def __init__(self, path: str, revisions: list[str]):
        super().__init__(
            f"{path} has {len(revisions)} schema revisions in alembic_version ({', '.join(revisions)}), where a "
            "database has one, so which schema it holds is unknown; it was left untouched"
        )


class NoDatabase(SchemaError, LookupError):
    """A file to migrate that does not exist."""

    def __init__(self, label: str):
        super().__init__(f"{label}: no such database file")


class NothingToMigrate(SchemaError):
    """The file is empty: there is no schema to bring anywhere."""

    def __init__(self, label: str):
        super().__init__(f"{label} is empty: nothing to migrate (create it with `openhands-memory init {label}`)")


class UnknownRevision(SchemaError, ValueError):
    """A migration asked to a revision this library does not know; ``allowed`` says which it
    knows ("one of 0001, 0002, ...")."""

    def __init__(self, revision: str, allowed: str):
        self.revision = revision
        super().__init__(f"{revision!r} is not a revision ({allowed})")


class WrongDirection(SchemaError):
    """An upgrade asked to a revision older than the file's (a downgrade must be asked as one)."""

    def __init__(self, label: str, current: str, target: str):
        self.current, self.target = current, target
        super().__init__(f"{label} is at {current}, newer than {target}")


class MigrationFailed(SchemaError):
    """A revision's own statements failed; the transaction was rolled back."""


class PostgresUnavailable(OpenHandsMemoryError):
    """A postgresql:// URL was given, and psycopg 3 is not installed."""

    def __init__(self, label: str):
        super().__init__(
            f"{label}: PostgreSQL needs psycopg 3; install it with `pip install 'openhands-memory[postgres]'`"
        )


class DatabaseUnreachable(OpenHandsMemoryError):
    """The PostgreSQL server refused the connection, or the database does not exist."""

    def __init__(self, label: str, why: str):
        self.why = why
        super().__init__(f"{label}: cannot connect: {why}")


class TooManyConnections(DatabaseUnreachable):
    """The server (``max_connections``, SQLSTATE 53300) or a pooler in front of it (PgBouncer's
    ``max_client_conn``) refused a new connection: every one it allows is taken."""

    #: What libpq's reason says of each (the server's, PgBouncer's).
    SIGNS = ("too many clients", "remaining connection slots are reserved", "no more connections allowed")

    def __init__(self, label: str, why: str):
        super().__init__(
            label,
            f"{why} (every connection it allows is taken: a fleet of agents belongs behind a "
            "pooler such as PgBouncer, or raise the limit; one store holds one connection)",
        )
        self.why = why


class ConnectTimeout(DatabaseUnreachable):
    """The PostgreSQL server did not complete the connection in time (a host that accepts
    the connection and never answers, a server stuck starting up)."""

    def __init__(self, label: str, seconds: float):
        self.seconds = seconds
        super().__init__(
            label,
            f"the server did not answer within {seconds:g} s (connect_timeout; set "
            "connect_timeout=SECONDS in the URL or PGCONNECT_TIMEOUT to wait longer)",
        )


class ServerFailure(OpenHandsMemoryError):
    """PostgreSQL failed a command under way: the connection was lost, a statement ran into a
    time limit or was cancelled, or the server ran out of something.

    ``committed`` says what became of the command's write: ``False`` when nothing was written
    (a read, or a transaction the server rolled back), ``None`` when a COMMIT (or the Sync
    that commits a pipelined append) was sent and its answer never came: it may have landed,
    and ``check`` is the command that shows whether it did. The library never retries a write
    by itself: the gap-free ids make a duplicate id impossible, but a write retried after it
    had landed would store the same events twice.

    (Not a ``ConnectionError`` or ``TimeoutError``: those are ``OSError``s, and code that
    takes an ``OSError`` for a missing file must not take a lost server for one.)
    """

    #: What happened, as the message says it.
    what = "the server failed the command"
    #: What to do when nothing was written.
    advice = "run the command again"

    def __init__(self, label: str, reason: str, *, writing: bool, committed: bool | None = False,
                 check: str = ""):
        self.label, self.reason, self.writing, self.committed = label, reason, writing, committed
        if committed is None:
            outcome = (f"the write may have been committed; run `{check}` to check "
                       "(writes are never retried: a retried write could store the same events twice)")
        elif writing:
            outcome = f"nothing was written (the server rolled the transaction back); {self.advice}"
        else:
            outcome = f"nothing was written; {self.advice}"
        super().__init__(f"{label}: {self.what} while {'writing' if writing else 'reading'} ({reason}); {outcome}")


class ConnectionLost(ServerFailure):
    """The connection to the server ended under a command (the server restarted or ended the
    session, the network failed). The next call connects again; a read retries once by
    itself, a write never does."""

    what = "the connection to the server was lost"


class PoolerTimeout(ConnectionLost):
    """A pooler in front of the server (PgBouncer's ``query_wait_timeout``) gave up waiting
    for a server connection to run a command's first statement on, and ended the connection:
    every server connection its pool may open was busy, or the server refused more. Nothing
    reached the server; the next call connects again, but no read retries by itself (it
    would wait as long again)."""

    what = "the pooler found no free server connection for the command in time"
    advice = ("run it again; if it keeps happening, the pooler's pool (default_pool_size) or the "
              "server's max_connections is too small for the load")

    #: What PgBouncer's message says.
    SIGN = "query_wait_timeout"


class StatementTimeout(ServerFailure):
    """The server stopped a statement at one of its time limits (statement_timeout,
    lock_timeout)."""

    what = "the server stopped a statement at its time limit"
    advice = ("the limit is the session's statement_timeout or lock_timeout (the URL's options, "
              "PGOPTIONS or the server's settings)")


class StatementCancelled(ServerFailure):
    """The server cancelled a statement at someone's request (``pg_cancel_backend``, a
    cancel request from another client)."""

    what = "the server cancelled a statement"


class ServerLimitExceeded(ServerFailure):
    """The server refused what a command gave it as past one of its fixed limits (an index
    entry of more than some 2,700 bytes: an event's id of thousands of characters). The same
    command fails the same way: nothing to retry."""

    what = "the server refused a value past one of its limits"
    advice = "the same command fails again as it is (a value in it, such as an id, is too large)"


class LockTimeout(OpenHandsMemoryError):
    """A write transaction's lock (SQLite's write lock on the file, PostgreSQL's lock on the
    conversation's row) stayed with another connection for as long as the caller would wait.
    Nothing was written. (Not a ``TimeoutError``, which is an ``OSError``: see
    ``ServerFailure``; the SDK's file store raises the SDK's ``TimeoutError`` from it.)"""

    def __init__(self, label: str, conversation_id: str | None, seconds: float):
        self.label, self.conversation_id, self.seconds = label, conversation_id, seconds
        what = f"conversation {conversation_id!r}" if conversation_id is not None else "the database"
        super().__init__(
            f"{label}: a write to {what} waited {seconds:g} s, as long as it would, for the lock another "
            "connection held; nothing was written (run it again once that writer is done)"
        )


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


class TemporaryFolderFull(DiskFull):
    """SQLite's temporary folder filled up (where a large write keeps its journal and a bulk
    load sorts its indexes' keys) while the database's own disk had room."""

    def __init__(self, folder: str, path: str, outcome: str):
        self.folder = folder
        super().__init__(folder, f"SQLite keeps a large write's journal and a bulk load's sorts for {path} there "
                                 f"(SQLITE_TMPDIR moves them); {outcome}")


class ReadOnlyPlace(StorageFault):
    def __init__(self, path: str, reason: str, outcome: str):
        self.path = path
        super().__init__(f"{path}: {reason}; {outcome}")


class OverwritesInput(OpenHandsMemoryError, ValueError):
    """A command was asked to write a file it reads: a database (or a file SQLite keeps
    beside one), a config, by any of its names (a hard or symbolic link counts)."""

    def __init__(self, output: str, read: str, *, other_name: bool = False):
        self.output, self.read = output, read
        how = " (by another name: a hard or symbolic link)" if other_name else ""
        super().__init__(f"{output} is {read}{how}, which this command reads; nothing was written "
                         "(give another path)")


class UnwritableOutput(OpenHandsMemoryError, ValueError):
    """A file a command would write is a name no file can have there, or lies where it cannot
    be written (``files.check_output``): found before the command does anything."""

    def __init__(self, path: str, why: str, *, what: str = "", outcome: str = "nothing was written"):
        self.path, self.why = path, why
        name = shown(path, 200) if not path or not path.isprintable() or len(path) > 200 else path
        super().__init__(f"{what} {name}".strip() + f": {why}; {outcome}")


class ScratchRefused(OpenHandsMemoryError, ValueError):
    """A replay's scratch database must be new, or one that holds only what replays wrote:
    a replay replaces its conversations, and must not change anyone else's."""

    def __init__(self, path: str, why: str):
        self.path = path
        super().__init__(f"{path}: {why}; it was left untouched (give a new path for the scratch database, or one "
                         "an earlier replay made)")


class StoreClosed(OpenHandsMemoryError):
    """A long view's event was read after its store was closed: such a view reads an event
    from the store the first time it is read (its messages need none)."""

    def __init__(self, label: str, conversation_id: str):
        self.label = label
        super().__init__(
            f"{label}: the store is closed, and this long view of conversation {conversation_id!r} reads "
            "its events from it when they are first read; read them (list(view.events)) before closing it"
        )


class BrokenLink(OpenHandsMemoryError):
    """The database path is a symbolic link that leads nowhere: a loop, or a missing target.
    Neither readers nor writers follow it (a writer would create a file the user did not
    name)."""

    def __init__(self, path: str, why: str):
        self.path = path
        super().__init__(f"{path} is {why}; nothing was read or written (give the real path, or fix the link)")


class PinRefused(OpenHandsMemoryError, ValueError):
    """A pin or unpin that cannot be made as asked (the message says why and what to do)."""


class PinBudgetExceeded(PinRefused):
    """The pinned events would take more of the context window than allowed."""

    def __init__(self, tokens: int, budget: int, pins: list[tuple[int, int]]):
        self.tokens, self.budget, self.pins = tokens, budget, pins
        named = ", ".join(f"#{seq} ({n:,})" for seq, n in sorted(pins, key=lambda p: -p[1])[:8])
        more = f" and {len(pins) - 8} more" if len(pins) > 8 else ""
        super().__init__(
            f"pinned events would take {tokens:,} tokens, over the pin budget of {budget:,}: "
            f"{named}{more}; unpin some, pin with mode reinject in a group, or raise the budget"
        )
