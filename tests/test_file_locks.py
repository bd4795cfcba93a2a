"""SQLite's locks stay with the process while its connections are open.

On POSIX, closing any descriptor of a file drops every advisory lock the process holds on it,
among them the shared lock by which an open connection tells other processes that the WAL is
in use. Had the library opened a database's files through a descriptor of its own while a
connection of the process was open (to read the header, say), the next other process to close
the file would delete the WAL in use: the first process's later commits would go into a
deleted file, invisible to everyone, and overwrite another's commit when it closed.

These tests hold several stores open in this process while other processes open, read, write
and close the same file, and watch (with an audit hook) that nothing in the package opens,
removes or renames the database's files outside SQLite while a store is open.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from openhands_memory.conversation import EventStore

from . import factories as f
from .cli_runner import invoke

REPO = Path(__file__).resolve().parent.parent

# Another process that, for each line it reads, opens a fresh store, does one thing and
# closes it (the close is what deleted a WAL in use): "count CONV" prints the conversation's
# length, "append CONV TEXT" appends a user message and prints the new length.
PEER = r"""
import sys
from openhands_memory import EventStore, Message, MessageEvent, TextContent
db = sys.argv[1]
for line in sys.stdin:
    verb, conv, *rest = line.split()
    with EventStore(db) as store:
        if verb == "append":
            c = store.conversation(conv) if conv in [x.id for x in store.conversations()] else store.create_conversation(conv)
            c.append(MessageEvent(source="user", llm_message=Message(role="user", content=[TextContent(text=rest[0])])))
            n = len(c)
        else:
            n = len(store.conversation(conv))
    print(n, flush=True)
"""


class Peer:
    """A long-lived other process (one import, many opens and closes of the file)."""

    def __init__(self, db: Path):
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen([sys.executable, "-c", PEER, str(db)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)

    def ask(self, line: str) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, f"the peer process died on {line!r}"
        return int(answer)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0


@pytest.fixture
def peer(tmp_path):
    made: list[Peer] = []

    def start(db: Path) -> Peer:
        made.append(Peer(db))
        return made[-1]

    yield start
    for p in made:
        if p.proc.poll() is None:
            p.proc.kill()


def test_commits_stay_visible_while_stores_of_the_file_come_and_go_in_one_process(tmp_path, peer):
    db = tmp_path / "agent.db"
    wal = Path(f"{db}-wal")
    first = EventStore(db)
    conv = first.create_conversation("c")
    conv.append(f.user("0"))
    other = peer(db)
    extra: list[EventStore] = []
    for i in range(1, 7):
        # Another store on the same file in this process: a read-write one, a read-only one,
        # or one opened and closed at once.
        if i % 3 == 0:
            EventStore(db).close()
        else:
            extra.append(EventStore(db, readonly=i % 3 == 2, create=False))
        assert other.ask("count c") == i  # the other process opens and closes the file
        assert wal.exists(), "a WAL in use was deleted by another process's close"
        conv.append(f.user(str(i)))
        assert other.ask("count c") == i + 1, "a commit is invisible to another process"
        assert other.ask(f"append o {i}") == i  # the other process writes too
        assert len(first.conversation("o")) == i
    for store in extra:
        store.close()
    first.close()
    other.close()
    with EventStore(db, readonly=True, create=False) as fresh:
        assert [e.llm_message.content[0].text for e in fresh.conversation("c").events()] == [str(i) for i in range(7)]
        assert [e.llm_message.content[0].text for e in fresh.conversation("o").events()] == [str(i) for i in range(1, 7)]


def test_a_conversations_lock_is_held_by_one_process_at_a_time(tmp_path, peer):
    """A second store of this process, then another process opening and closing the file,
    must leave the first store's write transaction exclusive: the other process's append
    waits for it, and lands after it."""
    db = tmp_path / "agent.db"
    store = EventStore(db)
    conv = store.create_conversation("c")
    EventStore(db).close()
    other = peer(db)
    assert other.ask("count c") == 0
    answers: list[int] = []
    with conv.writing() as w:
        w.append([f.user("mine")])
        waiting = threading.Thread(target=lambda: answers.append(other.ask("append c theirs")))
        waiting.start()
        waiting.join(1.0)
        assert waiting.is_alive(), "the other process wrote while this one held the write lock"
    waiting.join(30)
    assert answers == [2]
    other.close()
    assert [e.llm_message.content[0].text for e in conv.events()] == ["mine", "theirs"]
    store.close()


# --- nothing opens the database's files outside SQLite while a store is open -------------

_watched: set[str] = set()
_touched: list[str] = []
_EVENTS = {"open", "os.remove", "os.rename", "os.truncate", "os.link", "os.symlink", "shutil.copyfile",
           "shutil.rmtree", "os.chmod"}


def _audit(event: str, args: tuple) -> None:
    if not _watched or event not in _EVENTS:
        return
    for arg in args[:2]:
        if isinstance(arg, (str, bytes, os.PathLike)):
            name = os.fsdecode(arg)
            if os.path.realpath(name) in _watched:
                _touched.append(f"{event} {name}")


sys.addaudithook(_audit)  # an audit hook cannot be removed: it does nothing unless _watched


def watch(db: Path) -> None:
    real = os.path.realpath(db)
    _watched.update(real + suffix for suffix in ("", "-wal", "-shm", "-journal"))


def commands(db: Path, tmp: Path) -> list[list[str]]:
    """Every command of the CLI on ``db`` (and ``search-index off/on``, ``import``, ``demo``
    elsewhere), in an order where each has something to work on."""
    lines = tmp / "events.jsonl"
    lines.write_text(f.user("imported").model_dump_json() + "\n")
    return [
        ["init", db], ["migrate", db], ["conversations", db], ["stats", db], ["doctor", db],
        ["doctor", db, "--full"], ["sql", db, "SELECT COUNT(*) FROM event"],
        ["append", db, "c", str(lines)], ["view", db, "c"], ["history", db, "c"],
        ["import", db, str(lines), "--as", "imported"], ["export", db, "c", "-o", str(tmp / "c.jsonl")],
        ["branches", db, "c"], ["navigate", db, "c", "3"], ["fork", db, "c", "--as", "forked"],
        ["condense", db, "c", "-t", "llm", "-s", "max_size=6", "-s", "keep_first=1"],
        ["request-condensation", db, "c"], ["pin", db, "c", "1"], ["pins", db, "c"],
        ["unpin", db, "c", "1"], ["replay", db, "c"], ["search", db, "c", "hello", "--scope", "all"],
        ["show", db, "c", "0"], ["search-index", db, "off"], ["search-index", db, "on"],
        ["doctor", db, "--fix"], ["demo", str(tmp / "demo.db")], ["serve", db],
        ["sync", db, "--agent-server", f"http://127.0.0.1:{nobody_listens()}"],
    ]


def nobody_listens() -> int:
    """A loopback port no one listens on: ``sync`` opens the database, finds no agent server
    there and says so (tests/test_agent_server.py syncs from a real one)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_pages(db: Path) -> None:
    """What ``serve`` does to the database: the inspector's app, every kind of page read
    (uvicorn only carries the requests)."""
    from starlette.testclient import TestClient

    from openhands_memory.web import create_app

    with TestClient(create_app(db)) as client:
        for page in ("/", "/c/c", "/c/c/call/1", "/c/c/event/0", "/c/c/events", "/search?q=hello&c=c"):
            assert client.get(page).status_code in (200, 404), page
    from openhands_memory.web.app import create_app as with_ingest

    with TestClient(with_ingest(db, ingest=True)) as client:  # serve --ingest writes beside the pages
        hello = json.loads(f.user("from an agent server").model_dump_json())
        assert client.post(f"/events/{uuid.uuid4().hex}", json=[hello]).json()["stored"] == 1


def test_the_list_holds_every_command(tmp_path):
    """A new command joins the test below, or this fails."""
    from openhands_memory.cli import COMMANDS

    assert {args[0] for args in commands(tmp_path / "x.db", tmp_path)} == set(COMMANDS)


def test_no_command_touches_the_files_of_a_database_a_store_holds_open(tmp_path, peer):
    db = tmp_path / "agent.db"
    store = EventStore(db)
    conv = store.create_conversation("c")
    for i in range(8):
        conv.append(f.user(f"hello {i}"))
    other = peer(db)
    watch(db)
    try:
        for args in commands(db, tmp_path):
            if args[0] == "serve":
                serve_pages(db)
            elif args[0] == "sync":
                result = invoke(*args)
                assert result.exit_code == 1 and "cannot reach the agent server" in result.output, result.output
            else:
                result = invoke(*args)
                assert result.exit_code == 0, f"{args}: {result.output}"
            assert not _touched, f"{' '.join(map(str, args[:1]))} touched the files outside SQLite: {_touched}"
            # The open store still writes where everyone reads.
            before = len(conv)
            conv.append(f.user("after " + str(args[0])))
            assert other.ask("count c") == before + 1, f"a commit went missing after {args[0]}"
        second = EventStore(db)
        readonly = EventStore(db, readonly=True, create=False)
        readonly.close()
        second.close()
        assert not _touched, _touched
    finally:
        _watched.clear()
        _touched.clear()
    other.close()
    store.close()
