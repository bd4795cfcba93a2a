"""An import's input read and parsed in child processes while this one writes.

Parsing (pydantic validating every event: its JSON parsed and checked against the event's
model), and for an SDK folder a few system calls per event file, are most of an import's
time; the writes are the rest. A thread cannot do them beside the writes: the GIL goes with
them, and a thread that gives it up for each row's write (``sqlite3`` does, and so do file
reads) waits up to the switch interval (5 ms) to get it back. So ``CHILDREN`` processes,
started with this interpreter at a lower priority, are dealt the input's batches in turn;
each reads and parses its batches as an import in one process does (``jsonl.event_lines``
and ``common.parse_event_json``, ``sdk.read_raw`` and ``sdk.parse_file``: the same checks,
the same errors), except that an ActionEvent or ObservationEvent that msgspec reads as
pydantic would becomes its row without pydantic (``quick_rows``: 2.5 us an event, not 8),
and sends each batch down a pipe as it is parsed. This process takes the batches in order,
checks each as it comes (``common.Checker``; for a folder ``sdk.check_parents``) and writes
it, while the children parse the next ones.

What crosses the pipe for an event is its row (``codec.event_row``: the event's JSON text
as the file holds it, the columns taken from the event, and its id in the new conversation:
its place in the input), its parent, and where it was read; a Condensation (a few in a
hundred) is sent as its JSON text and parsed again here, so that recording it reads the
event itself. An error a child meets (``ImportFailed``, naming the file and line) ends its
stream and is raised here when the import comes to that batch, which is where an import in
one process raises it: everything before it has been checked and written in the
transaction, which rolls back. A failed import stops the children (``batches`` is closed).

Only inputs large enough to pay for the children's start (some 0.25 s: an interpreter and
the event models) take this way (``PARALLEL_EVENTS``, ``PARALLEL_BYTES``).
"""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path
from typing import IO, Any, Iterator

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

from ..events import Condensation
from ..storage.codec import event_row
from .common import ImportFailed, parse_event_json
from .sdk import check_parents

#: An SDK folder of at least this many event files, or a JSON Lines file of at least this
#: many bytes, is parsed in a child process.
PARALLEL_EVENTS = 20_000
PARALLEL_BYTES = 24 << 20
#: How many children parse the input, each every other batch.
CHILDREN = 2

#: The room asked for in each child's pipe (``_widen``).
PIPE_BYTES = 1 << 20

_LENGTH = struct.Struct("<Q")


class Head:
    """What the writing side reads of an event the child parsed (the checker, the tree):
    its external id, its kind, the parent its JSON names."""

    __slots__ = ("id", "kind", "parent_id")

    def __init__(self, id: str, kind: str, parent_id: str | None):
        self.id, self.kind, self.parent_id = id, kind, parent_id


def usable() -> bool:
    """Whether a child can be started: this interpreter knows its own executable."""
    return bool(sys.executable)


def _package_root() -> str:
    return str(Path(__file__).resolve().parent.parent.parent)


def batches(job: dict[str, Any], parsers: Parsers | None = None) -> Iterator[list[tuple[Any, ...]]]:
    """The input ``job`` names, parsed in child processes, a batch at a time: items
    ``(event or Head, where, JSON text, row or None)``, as ``common.write_conversation`` takes
    them: the rows are the new conversation's, from id 0. ``job``: ``{"format": "jsonl",
    "path": ..., "conversation_id": ..., "chunk": n}`` or ``{"format": "openhands",
    "events_dir": ..., "files": [...], "conversation_id": ..., "chunk": n}``.

    The batches are dealt to ``CHILDREN`` children in turn (one alone parses more slowly
    than this process writes): each reads the whole JSON Lines file (its lines are found by
    reading it in order; an error in reading it is the same for each, and the first in order
    is raised) and parses its own batches' lines; a folder's files are read by the child whose
    batch holds them. The parents each event of a folder names are judged here, in order, as
    ``sdk.batches`` judges them (``sdk.check_parents``). ``parsers``: the children, started
    already (the caller stops them if this generator never runs); else started here."""
    chunk = job["chunk"]
    if job["format"] == "jsonl":
        jobs = [{**job, "part": k, "parts": CHILDREN} for k in range(CHILDREN)]
        seen: set[str] | None = None
    else:
        files = job["files"]
        dealt = [(start, files[start : start + chunk]) for start in range(0, len(files), chunk)]
        count = CHILDREN if len(dealt) >= CHILDREN else 1
        jobs = [{"format": "openhands", "events_dir": job["events_dir"], "conversation_id": job["conversation_id"],
                 "batches": dealt[k::count]} for k in range(count)]
        seen = set()
    source = job["path"] if job["format"] == "jsonl" else job["events_dir"]
    children = (parsers or Parsers(len(jobs))).send(jobs)
    buffer = bytearray()
    try:
        k = done = 0
        short = False  # a batch short of ``chunk`` came: the input's last
        while True:
            child = children[k % len(children)]
            k += 1
            frame = _read_frame(child.stdout, buffer)
            if frame is None:
                status = child.wait()
                raise RuntimeError(f"the process parsing the import's input ended unexpectedly (exit status "
                                   f"{status}); nothing was imported")
            tag = frame[0]
            if tag == "batch":
                wires = frame[1]
                # Each child counted the events itself: a file that changed while they read it
                # could have them disagree (a row's id is its place in the input).
                first = next((i for i, w in enumerate(wires) if not isinstance(w[1], str)), None)
                if short or (first is not None and wires[first][1][1] != done + first):
                    raise ImportFailed(source, "it changed while it was being read; nothing was imported")
                short, done = len(wires) < chunk, done + len(wires)
                batch = [_item(*wire) for wire in wires]
                if job["format"] == "openhands":
                    seen = check_parents(batch, seen)
                yield batch
            elif tag == "failed":
                raise ImportFailed(frame[1], frame[2])
            elif tag == "raised":
                raise pickle.loads(frame[1])
            else:  # "end": every batch was dealt in turn, so the others are at their end too
                for other in children:
                    if other is not child and _read_frame(other.stdout, buffer) != ("end",):
                        raise ImportFailed(source, "it changed while it was being read; nothing was imported")
                return
    finally:
        _stop(children)


class Parsers:
    """Child processes started ahead of their work, each waiting for its job (``batches``
    sends it): an interpreter and the event models take some 0.25 s to start, which an
    importer spends judging its input meanwhile (a million file names: 0.4 s). Closing
    (``close``, or leaving the ``with`` block) stops those still running."""

    def __init__(self, count: int = CHILDREN):
        code = (f"import sys; sys.path.insert(0, {_package_root()!r}); "
                "from openhands_memory.io.parallel import serve; serve()")
        self.children: "list[subprocess.Popen[bytes]]" = []
        try:
            for _ in range(count):
                child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                self.children.append(child)
                assert child.stdout is not None
                _widen(child.stdout)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> "Parsers":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        _stop(self.children)

    def send(self, jobs: list[dict[str, Any]]) -> "list[subprocess.Popen[bytes]]":
        """Each job to a child of its own, in order; the children left over are stopped."""
        if len(jobs) > len(self.children):
            raise ValueError(f"{len(jobs)} jobs for {len(self.children)} children")
        working = self.children[: len(jobs)]
        _stop(self.children[len(jobs) :])
        for child, job in zip(working, jobs):
            assert child.stdin is not None
            try:
                child.stdin.write(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
                child.stdin.close()
            except BrokenPipeError:
                pass  # it ended at once: its end is reported when its first frame is read
        return working


def _stop(children: "list[subprocess.Popen[bytes]]") -> None:
    for child in children:
        if child.poll() is None:
            child.kill()
        child.wait()
        for pipe in (child.stdin, child.stdout):
            if pipe is not None and not pipe.closed:
                try:
                    pipe.close()
                except BrokenPipeError:
                    pass


def _widen(pipe: IO[bytes]) -> None:
    """Give ``pipe`` ``PIPE_BYTES`` of room where the system allows it (Linux's
    ``F_SETPIPE_SZ``; an unprivileged process may ask up to ``/proc/sys/fs/pipe-max-size``,
    1 MB unless changed). A batch is some 4 MB: through the default 64 KB, the child and
    this process took turns some 70 times a batch, each waking the other (1.9 s of the
    importer's 21 at a million SDK files, against 0.95 s through 1 MB)."""
    setter = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    if setter is None:
        return
    try:
        fcntl.fcntl(pipe.fileno(), setter, PIPE_BYTES)
    except OSError:  # over the limit the system sets: the pipe keeps its size
        pass


def _item(where: str, row: tuple[Any, ...] | str, parent_id: str | None) -> tuple[Any, ...]:
    if isinstance(row, str):  # a Condensation's text: parsed here, where it is recorded
        return parse_event_json(row, where), where, row, None
    return Head(row[5], row[2], parent_id), where, row[-1], row


def _read_frame(stream: IO[bytes], buffer: bytearray) -> Any:
    """The next frame, read into ``buffer`` (grown as needed, kept by the caller): a batch is
    some 4 MB, and a new ``bytes`` of that size is fresh memory each time, which the system
    zeroes page by page (5 % of the importer's time at 1M events)."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    if len(buffer) < size:
        buffer.extend(bytes(size - len(buffer)))
    view = memoryview(buffer)[:size]
    try:
        got = 0
        while got < size and (n := stream.readinto(view[got:])):
            got += n
        return pickle.loads(view) if got == size else None
    finally:
        view.release()


# --- the child ---------------------------------------------------------------------------


def _send(out: IO[bytes], frame: Any) -> None:
    data = pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_LENGTH.pack(len(data)))
    out.write(data)
    out.flush()


def _wire(cid: str, seq: int, event: Any, where: str, text: str | None) -> tuple[Any, ...]:
    if isinstance(event, Condensation):
        return where, text if text is not None else event.model_dump_json(exclude_none=True), None
    return where, event_row(cid, seq, event, text, checked=False), event.parent_id


def serve() -> None:
    """The child's side: read the job from stdin, send its batches to stdout."""
    import signal

    from ..allocation import collector_paused

    # Ctrl-C reaches the whole process group: the importer stops its children itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Below the importer's priority: three processes share two cores, and the importer's
    # writes are the one stream every batch must pass through. At an equal share the
    # scheduler gave it two thirds of a core; a million SDK files took 24 s, 22.6 s after.
    if hasattr(os, "nice"):
        os.nice(10)
    from . import jsonl, quick_rows, sdk

    with collector_paused(always=True):  # its own process; its events live for a batch
        _serve(jsonl, quick_rows, sdk)


def _serve(jsonl: Any, quick_rows: Any, sdk: Any) -> None:
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr  # nothing else may write into the frames
    try:
        job = pickle.load(sys.stdin.buffer)
    except EOFError:  # stopped before it was sent a job (the importer found its input bad)
        return
    try:
        try:
            cid = job["conversation_id"]
            if job["format"] == "jsonl":  # each event is sent on as soon as it is parsed
                path, chunk, part, parts = Path(job["path"]), job["chunk"], job["part"], job["parts"]
                label = str(path)
                batch: list[tuple[Any, ...]] = []
                for seq, (number, line) in enumerate(jsonl.event_lines(path)):
                    if (seq // chunk) % parts != part:
                        continue
                    where = f"{label}:{number}"
                    quick = quick_rows.row(cid, seq, line)
                    batch.append((where, *quick) if quick is not None else
                                 _wire(cid, seq, parse_event_json(line, where), where, line.decode()))
                    if len(batch) == chunk:
                        _send(out, ("batch", batch))
                        batch = []
                if batch:
                    _send(out, ("batch", batch))
            else:  # its share of the folder's batches; the parents are judged by the importer
                for start, names in job["batches"]:
                    wires = []
                    for seq, (path, name, data) in enumerate(sdk.read_raw(job["events_dir"], names), start):
                        quick = quick_rows.row(cid, seq, data) if isinstance(data, bytes) else None
                        if quick is not None and quick[0][5] == sdk.file_id(name):
                            wires.append((path, *quick))
                        else:  # pydantic's way, which words what is wrong
                            wires.append(_wire(cid, seq, *sdk.parse_file(path, name, data)))
                    _send(out, ("batch", wires))
        except ImportFailed as e:
            _send(out, ("failed", e.where, e.what))
            return
        except Exception as e:
            try:
                raised = pickle.dumps(e)
                pickle.loads(raised)
            except Exception:
                raised = pickle.dumps(RuntimeError(f"parsing the import's input failed: {type(e).__name__}: {e}"))
            _send(out, ("raised", raised))
            return
        _send(out, ("end",))
    except BrokenPipeError:
        pass  # the importer stopped reading (it failed, or was stopped): nothing to say
    finally:
        try:
            out.close()
        except BrokenPipeError:
            pass
