"""What the storage formats issues 42 and 43 ask about would cost: bytes on disk per event
against the CPU of a resume that sends every event, beside this code's and
``SQLiteSession``'s.

    PYTHONPATH=. python bench/formats.py [--sizes 10k,100k] [--repeats 5]

The histories are ``bench/peers.py``'s (built there first if missing): the SDK workload
without Condensations as this project's events, the same items through ``MemorySession``,
and through OpenAI's ``SQLiteSession``. Every resume runs in this process, warm, one after
another in each repeat, from a fresh connection; medians of ``--repeats``. (In-process
figures are lower than ``bench/peers.py``'s, whose children also pay a cold start: compare
the rows of one table, not across benches.)

Rows:

* *this code*: ``EventStore`` + ``view()`` + ``to_messages()``; ``MemorySession``'s
  ``get_items`` without its thread hop (``ChatHistory.messages``).
* *a rendered message per row*: each message the view sends stored as its own JSON beside
  the row's indexed facts; the resume reads and decodes them, and does nothing else (no
  grouping, no enforcement): a lower bound for a per-event rendered column.
* *rendered messages in chunks of 1,024*: the view's messages as JSON arrays, and the facts
  of every row (what enforcement reads); a lower bound for a rendered-view cache.
* *payload compressed*: each event's JSON by zlib (level 6) and, if the ``zstandard``
  package is installed, by zstd with a dictionary trained on the history; the resume column
  adds the time to decompress every payload to this code's resume.
* *items kept whole*: each ``MemorySession`` item's JSON in a column beside its row's facts;
  the resume reads and decodes them.
* ``SQLiteSession``: its statement and ``json.loads`` of each row, in this process.

The disk column is the bytes per event of what the row stores (a column or table's pages,
from ``dbstat``), or of the file for this code and ``SQLiteSession``.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import database, human, load, machine, median, parse_size, say  # noqa: E402
from bench.peers import DEFAULT_DIR, fold_wal, no_condenser, peer_history  # noqa: E402
from bench.peer_stores.registry import STORES  # noqa: E402
from bench.report import table  # noqa: E402
from openhands_memory import EventStore  # noqa: E402
from openhands_memory.allocation import collector_paused  # noqa: E402
from openhands_memory.chat import ChatHistory  # noqa: E402

CONVERSATION = "bench"
CHUNK = 1024
FACTS = "id, kind, has_thinking, tool_call_id, llm_response_id"

try:
    import zstandard
except ImportError:  # pragma: no cover - an optional row
    zstandard = None


def timed(work: Callable[[], Any]) -> float:
    with collector_paused():
        t = time.process_time()
        work()
        return time.process_time() - t


def table_bytes(db: sqlite3.Connection, name: str) -> int:
    return db.execute("SELECT sum(pgsize) FROM dbstat WHERE name = ?", (name,)).fetchone()[0] or 0


class Formats:
    """The alternatives for one size: their side tables in a scratch file, and how each is read."""

    def __init__(self, events_db: Path, session_db: Path, peer_db: Path, scratch: Path):
        self.events_db, self.session_db, self.peer_db = events_db, session_db, peer_db
        self.scratch = scratch
        with EventStore(events_db, create=False) as store:
            self.messages = store.conversation(CONVERSATION).view().to_messages()
        src = sqlite3.connect(events_db)
        self.n = src.execute("SELECT count(*) FROM event WHERE conversation_id = ?", (CONVERSATION,)).fetchone()[0]
        facts = src.execute(f"SELECT {FACTS} FROM event WHERE conversation_id = ? ORDER BY id", (CONVERSATION,)).fetchall()
        self.payloads = [p for (p,) in src.execute("SELECT payload FROM event WHERE conversation_id = ? ORDER BY id",
                                                    (CONVERSATION,))]
        src.close()
        with ChatHistory(session_db, CONVERSATION) as h:
            self.items = h.messages(condense=False)
        db = sqlite3.connect(scratch)
        db.execute("PRAGMA page_size = 16384")
        db.execute(f"CREATE TABLE facts (conversation_id TEXT, id INTEGER, kind TEXT, has_thinking BOOLEAN, "
                   f"tool_call_id TEXT, llm_response_id TEXT, PRIMARY KEY (conversation_id, id))")
        db.executemany("INSERT INTO facts VALUES ('bench', ?, ?, ?, ?, ?)", facts)
        enc = msgspec.json.Encoder()
        db.execute("CREATE TABLE sent (conversation_id TEXT, id INTEGER, kind TEXT, has_thinking BOOLEAN, "
                   "tool_call_id TEXT, llm_response_id TEXT, message TEXT, PRIMARY KEY (conversation_id, id))")
        # (a message a row: the row's facts beside it, as a rendered column would sit)
        db.executemany("INSERT INTO sent VALUES ('bench', ?, ?, ?, ?, ?, ?)",
                       [(*f[:5], enc.encode(m).decode()) for f, m in zip(facts, self.messages)])
        db.execute("CREATE TABLE chunk (conversation_id TEXT, first INTEGER, messages TEXT, "
                   "PRIMARY KEY (conversation_id, first))")
        db.executemany("INSERT INTO chunk VALUES ('bench', ?, ?)",
                       [(k, enc.encode(self.messages[k:k + CHUNK]).decode()) for k in range(0, len(self.messages), CHUNK)])
        db.execute("CREATE TABLE item (conversation_id TEXT, id INTEGER, kind TEXT, has_thinking BOOLEAN, "
                   "tool_call_id TEXT, llm_response_id TEXT, item TEXT, PRIMARY KEY (conversation_id, id))")
        db.executemany("INSERT INTO item VALUES ('bench', ?, 'x', 0, NULL, NULL, ?)",
                       [(k, enc.encode(x).decode()) for k, x in enumerate(self.items)])
        db.commit()
        self.sizes = {name: table_bytes(db, name) for name in ("facts", "sent", "chunk", "item")}
        db.close()
        self.zlib = [zlib.compress(p.encode(), 6) for p in self.payloads]
        self.zstd: list[bytes] | None = None
        if zstandard is not None:
            sample = [p.encode() for p in self.payloads[:: max(1, len(self.payloads) // 2000)]]
            self.zdict = zstandard.train_dictionary(112_640, sample)
            self.zstd = [zstandard.ZstdCompressor(level=3, dict_data=self.zdict).compress(p.encode())
                         for p in self.payloads]
            whole = zstandard.ZstdCompressor(level=3)
            self.zstd_chunks = [whole.compress(enc.encode(self.messages[k:k + CHUNK]))
                                for k in range(0, len(self.messages), CHUNK)]

    # --- the resumes ------------------------------------------------------------------

    def ours(self) -> None:
        with EventStore(self.events_db, create=False) as store:
            store.conversation(CONVERSATION).view().to_messages()

    def session(self) -> None:
        with ChatHistory(self.session_db, CONVERSATION) as h:
            h.messages(condense=False)

    def _column(self, name: str, column: str) -> None:
        db = sqlite3.connect(self.scratch)
        decode = msgspec.json.Decoder().decode
        out = []
        for row in db.execute(f"SELECT {FACTS}, {column} FROM {name} WHERE conversation_id = 'bench' ORDER BY id"):
            out.append(decode(row[5]))
        db.close()

    def per_row(self) -> None:
        self._column("sent", "message")

    def items_whole(self) -> None:
        self._column("item", "item")

    def chunks(self) -> None:
        db = sqlite3.connect(self.scratch)
        facts = db.execute(f"SELECT {FACTS} FROM facts WHERE conversation_id = 'bench' ORDER BY id").fetchall()
        decode = msgspec.json.Decoder().decode
        out: list[Any] = []
        for (text,) in db.execute("SELECT messages FROM chunk WHERE conversation_id = 'bench' ORDER BY first"):
            out.extend(decode(text))
        db.close()
        assert len(facts) == self.n

    def chunks_zstd(self) -> None:
        """``chunks`` with each chunk compressed (the facts read as there)."""
        db = sqlite3.connect(self.scratch)
        db.execute(f"SELECT {FACTS} FROM facts WHERE conversation_id = 'bench' ORDER BY id").fetchall()
        db.close()
        d, decode = zstandard.ZstdDecompressor(), msgspec.json.Decoder().decode
        out: list[Any] = []
        for blob in self.zstd_chunks:
            out.extend(decode(d.decompress(blob)))

    def unzlib(self) -> None:
        for b in self.zlib:
            zlib.decompress(b).decode()

    def unzstd(self) -> None:
        d = zstandard.ZstdDecompressor(dict_data=self.zdict)
        for b in self.zstd or ():
            d.decompress(b).decode()

    def peer(self) -> None:
        db = sqlite3.connect(self.peer_db)
        rows = db.execute("SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id ASC",
                          (CONVERSATION,)).fetchall()
        [json.loads(r[0]) for r in rows]
        db.close()


def measure(f: Formats, repeats: int) -> dict[str, float]:
    runs: dict[str, Callable[[], None]] = {
        "ours": f.ours, "session": f.session, "per_row": f.per_row, "chunks": f.chunks,
        "items_whole": f.items_whole, "unzlib": f.unzlib, "peer": f.peer,
    }
    if f.zstd is not None:
        runs["unzstd"] = f.unzstd
        runs["chunks_zstd"] = f.chunks_zstd
    laps: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(repeats):  # interleaved: every row once a repeat
        for name, work in runs.items():
            laps[name].append(timed(work))
    return {k: median(v) * 1000 for k, v in laps.items()}  # type: ignore[operator]


def rows(f: Formats, ms: dict[str, float], ours_file: int, session_file: int, peer_file: int) -> list[list[str]]:
    n = f.n
    payload = sum(len(p.encode()) for p in f.payloads) / n
    peer = ms["peer"]

    def line(label: str, disk: float, cpu: float) -> list[str]:
        return [label, f"{disk:,.0f} B", f"{cpu:,.1f} ms", f"{cpu / peer:.2f}×"]

    out = [
        line("this code, events (file)", ours_file / n, ms["ours"]),
        line("  + a rendered message per row", ours_file / n + f.sizes["sent"] / n, ms["per_row"]),
        line("  + rendered chunks (and facts)", ours_file / n + f.sizes["chunk"] / n, ms["chunks"]),
        line("  payload zlib", ours_file / n - payload + sum(map(len, f.zlib)) / n, ms["ours"] + ms["unzlib"]),
    ]
    if f.zstd is not None:
        zstd = ours_file / n - payload + sum(map(len, f.zstd)) / n
        out.append(line("  payload zstd + dictionary", zstd, ms["ours"] + ms["unzstd"]))
        out.append(line("    + rendered chunks, zstd", zstd + sum(map(len, f.zstd_chunks)) / n,
                        ms["chunks_zstd"]))
    out += [
        line("MemorySession (file)", session_file / n, ms["session"]),
        line("  + items kept whole", session_file / n + f.sizes["item"] / n, ms["items_whole"]),
        line("SQLiteSession (file)", peer_file / n, peer),
    ]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="example: PYTHONPATH=. python bench/formats.py --sizes 10k --repeats 3")
    ap.add_argument("--sizes", default="10k,100k", help="events per history (default: 10k,100k)")
    ap.add_argument("--repeats", type=int, default=5, help="repeats; figures are medians (default: 5)")
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"bench/peers.py's folder (default: {DEFAULT_DIR})")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    say(f"machine: {machine()}")
    say(f"load at start: {load()}")
    say(f"zstandard: {zstandard.__version__ if zstandard else 'not installed (its row is left out)'}")
    stores = {s.name: s for s in STORES}
    for size in args.sizes.split(","):
        n = parse_size(size)
        events_db = database(args.dir, no_condenser(), n, args.seed)
        session_db = peer_history(stores["ohm-session"], args.dir, n, args.seed)
        peer_db = peer_history(stores["openai-sqlite"], args.dir, n, args.seed)
        files = [fold_wal(p) for p in (events_db, session_db, peer_db)]
        with tempfile.TemporaryDirectory() as tmp:
            f = Formats(events_db, session_db, peer_db, Path(tmp) / "formats.db")
            ms = measure(f, args.repeats)
        print()
        say(f"{human(n)} workload events ({len(f.messages):,} messages; {len(f.items):,} items), "
            f"medians of {args.repeats}; ×: of SQLiteSession's resume CPU")
        print(table(["format", "disk/event", "resume CPU", "×"], rows(f, ms, *files)))
        say(f"compression of the events' JSON ({sum(map(len, f.payloads)) / f.n:,.0f} B an event): "
            + ", ".join(f"{name} {sum(map(len, f.payloads)) / sum(map(len, blobs)):.1f}×"
                        for name, blobs in (("zlib", f.zlib), ("zstd + dictionary", f.zstd)) if blobs)
            + " (the workload's texts come from a small vocabulary: real ones compress less)")
    say(f"load at end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
