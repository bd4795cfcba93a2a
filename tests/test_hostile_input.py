"""Hostile input to import and append: one line, exit 1, no traceback, nothing changed.

The corpus in ``tests/hostile/`` holds the inputs that once ended in a traceback (invalid
UTF-8, JSON nested 1,000 and more deep, a list-valued ``kind``, integers of more than 4,300
digits, ...) and their relatives. Each is thrown at every way in: ``import`` of the file,
``import`` of an SDK folder holding it as an event file, ``append`` from the file and from
stdin, into an existing database and into a new path. Inputs that cannot be kept as files
(a link to /dev/zero, a FIFO, a folder) are made by the tests. Hypothesis then mutates
valid inputs and checks that every run either succeeds or fails the same clean way.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from functools import partial
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openhands_memory.conversation import EventStore

from . import cli_runner
from . import factories as f

CORPUS = Path(__file__).parent / "hostile"
CASES = sorted(p.name for p in CORPUS.iterdir())
EVENT_ID = "aaaaaaaa-0000-4000-8000-000000000009"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# Every run's result as it came, an escaped exception included: refused() shows it.
invoke = partial(cli_runner.invoke, catch_exceptions=True)


def refused(result) -> str:
    """The run failed the way a user error must: exit 1, one line on stderr, no traceback."""
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    assert result.exit_code == 1, f"exit {result.exit_code}: {result.output}"
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""
    return lines[0]


def files_in(folder: Path) -> set[str]:
    return set(os.listdir(folder))


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A database with conversation ``c`` holding one event."""
    path = tmp_path_factory.mktemp("template") / "agent.db"
    with EventStore(path) as store:
        store.create_conversation("c").append(f.user("hello"))
    return path


@pytest.fixture
def db(template, tmp_path) -> Path:
    target = tmp_path / "db" / "agent.db"
    target.parent.mkdir()
    shutil.copyfile(template, target)
    return target


def check_all_ways(db: Path, source: Path, tmp_path: Path) -> None:
    """Every way the input at ``source`` can come in is refused, changing nothing."""
    before, around = digest(db), files_in(db.parent)
    fresh = tmp_path / "fresh"
    fresh.mkdir(exist_ok=True)
    runs = [
        ("import", db, source, "--as", "new"),
        ("import", fresh / "new.db", source),
        ("append", db, "c", source),
        ("append", "--create", db, "new", source),
        ("append", "--create", fresh / "new.db", "new", source),
    ]
    for args in runs:
        message = refused(invoke(*args))
        assert source.name in message, message  # the file is named (the problem may be cut)
        assert digest(db) == before, args
        assert files_in(db.parent) == around, args
        assert files_in(fresh) == set(), args


@pytest.mark.parametrize("name", CASES)
def test_corpus_file_is_refused_cleanly(db, tmp_path, name):
    check_all_ways(db, CORPUS / name, tmp_path)


@pytest.mark.parametrize("name", CASES)
def test_corpus_on_stdin_is_refused_cleanly(db, name):
    before = digest(db)
    for args in (("append", db, "c"), ("append", "--create", db, "new")):
        refused(invoke(*args, input=(CORPUS / name).read_bytes()))
        assert digest(db) == before


def sdk_folder(root: Path, second_event: bytes | None = None, link_to: str | None = None) -> Path:
    """An SDK conversation folder: one good event file, then the hostile one."""
    events = root / "events"
    events.mkdir(parents=True)
    good = f.user("hi")
    (events / f"event-00000-{good.id}.json").write_text(good.model_dump_json(exclude_none=True))
    second = events / f"event-00001-{EVENT_ID}.json"
    if link_to is not None:
        second.symlink_to(link_to)
    else:
        second.write_bytes(second_event or b"")
    return root


# Files whose bad part is a line; its last line alone is the event file (a repeated id is no
# fault in a folder of one good event and the repeat).
@pytest.mark.parametrize("name", [n for n in CASES if n.endswith(".jsonl") and n != "duplicate_event_id.jsonl"])
def test_corpus_as_sdk_event_file_is_refused_cleanly(db, tmp_path, name):
    lines = [line for line in (CORPUS / name).read_bytes().split(b"\n") if line.strip()]
    data = lines[-1] if lines else b""
    folder = sdk_folder(tmp_path / "conv", data.replace(b"aaaaaaaa-0000-4000-8000-000000000001", EVENT_ID.encode()))
    before = digest(db)
    refused(invoke("import", db, folder, "--as", "new"))
    assert digest(db) == before
    refused(invoke("import", tmp_path / "new.db", folder))
    assert not (tmp_path / "new.db").exists()


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_event_file_linked_to_dev_zero_is_refused_at_once(db, tmp_path):
    folder = sdk_folder(tmp_path / "conv", link_to="/dev/zero")
    before = digest(db)
    message = refused(invoke("import", db, folder, "--as", "new"))
    assert "event-00001" in message and "not a regular file" in message
    assert digest(db) == before
    zero = tmp_path / "zero.jsonl"
    zero.symlink_to("/dev/zero")
    check_all_ways(db, zero, tmp_path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_and_folder_inputs_are_refused(db, tmp_path):
    fifo = tmp_path / "events.jsonl"
    os.mkfifo(fifo)  # a reader would wait for a writer forever
    check_all_ways(db, fifo, tmp_path)
    before = digest(db)
    refused(invoke("append", db, "c", tmp_path))
    assert digest(db) == before


def test_missing_input_exits_1(db, tmp_path):
    for args in (("import", db, tmp_path / "nope.jsonl"), ("append", db, "c", tmp_path / "nope.jsonl")):
        assert "nope.jsonl" in refused(invoke(*args))


def test_append_create_is_all_or_nothing(db, tmp_path):
    """A batch whose last event is refused (a repeated external id) creates nothing: no
    conversation, and no file when the database was new."""
    first = f.user("one")
    events = [first, f.user("two"), first]
    source = tmp_path / "dup.jsonl"
    source.write_text("\n".join(e.model_dump_json(exclude_none=True) for e in events) + "\n")
    before = digest(db)
    refused(invoke("append", "--create", db, "new", source))
    assert digest(db) == before
    refused(invoke("append", "--create", tmp_path / "new.db", "new", source))
    assert not (tmp_path / "new.db").exists()
    ok = tmp_path / "ok.jsonl"
    ok.write_text(first.model_dump_json(exclude_none=True) + "\n")
    assert invoke("append", "--create", tmp_path / "new.db", "new", ok).exit_code == 0
    with EventStore(tmp_path / "new.db", create=False) as store:
        assert len(store.conversation("new")) == 1


def test_odd_database_files_are_refused_cleanly(tmp_path):
    """Opening what is not a database (zero bytes of garbage, a folder, a device, a truncated
    SQLite header) is one line and exit 1 for every command, and changes nothing."""
    cases = {
        "garbage.db": os.urandom(4096),
        "header-only.db": b"SQLite format 3\x00" + b"\x00" * 84,
        "text.db": b"hello\n",
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "folder.db").mkdir()
    paths = [tmp_path / n for n in (*cases, "folder.db")]
    if os.path.exists("/dev/zero"):
        (tmp_path / "zero.db").symlink_to("/dev/zero")
        paths.append(tmp_path / "zero.db")
    source = tmp_path / "one.jsonl"
    source.write_text(f.user("x").model_dump_json(exclude_none=True) + "\n")
    for path in paths:
        before = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        for args in (("view", path, "c"), ("stats", path), ("sql", path, "SELECT 1"), ("doctor", path),
                     ("append", "--create", path, "c", source), ("import", path, source), ("init", path),
                     ("migrate", path)):
            refused(invoke(*args))
            if before is not None:
                assert path.read_bytes() == before, args


# --- hypothesis: mutations of valid input ------------------------------------------------------

VALID = [
    f.user("fix the bug").model_dump_json(exclude_none=True),
    json.dumps([{"id": 1, "action": "message", "args": {"content": "hi"}, "source": "user"},
                {"id": 2, "action": "run", "args": {"command": "ls"}, "source": "agent"}]),
]


@st.composite
def mutated(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(VALID)).encode())
    for _ in range(draw(st.integers(1, 4))):
        how = draw(st.sampled_from(["flip", "insert", "delete", "nest"]))
        at = draw(st.integers(0, len(data)))
        if how == "flip" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif how == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif how == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        else:
            depth = draw(st.integers(150, 1500))
            data[at:at] = b"[" * depth + b"]" * depth
    return bytes(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=mutated(), via_stdin=st.booleans())
def test_mutated_input_succeeds_or_fails_cleanly(db, tmp_path, data, via_stdin):
    source = tmp_path / "input.json"
    source.write_bytes(data)
    before = digest(db)
    if via_stdin:
        result = invoke("append", db, "c", input=data)
    else:
        result = invoke("import", db, source, "--as", f"m{abs(hash(data))}")
    if result.exit_code == 0:
        return
    refused(result)
    assert digest(db) == before


# --- config files: condense --config, replay --config ------------------------------------------

CONFIG = b'[condenser]\ntype = "amortized"\nmax_size = 8\nkeep_first = 2\n'


@pytest.mark.parametrize("command", ["condense", "replay"])
@pytest.mark.parametrize("data, says", [
    (CONFIG.replace(b"amortized", b"amortiz\xe9d"), "not UTF-8 text (byte 0xe9 at offset 27)"),
    (b"\xff\xfe" + CONFIG.decode().encode("utf-16-le"), "not UTF-8 text (byte 0xff at offset 0)"),
    (CONFIG + b"\x00", "is not valid TOML"),
])
def test_a_config_that_is_not_utf8_toml_is_one_line(db, tmp_path, command, data, says):
    """Once a 41-line UnicodeDecodeError: now the file and the byte, on one line."""
    config = tmp_path / "config.toml"
    config.write_bytes(data)
    before = digest(db)
    extra = ["--dry-run"] if command == "condense" else []
    message = refused(invoke(command, db, "c", "--config", config, *extra))
    assert str(config) in message and says in message, message
    assert digest(db) == before


@st.composite
def mutated_config(draw) -> bytes:
    data = bytearray(CONFIG)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data)))
        how = draw(st.sampled_from(["flip", "insert", "delete"]))
        if how == "flip" and at < len(data):
            data[at] = draw(st.sampled_from([0x00, 0x80, 0xC3, 0xE9, 0xFF, ord('"'), ord("["), ord("=")]))
        elif how == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=6))
        else:
            del data[at : at + draw(st.integers(1, 6))]
    return bytes(data)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=mutated_config(), command=st.sampled_from(["condense", "replay"]))
def test_a_mutated_config_succeeds_or_fails_cleanly(db, tmp_path, data, command):
    config = tmp_path / "config.toml"
    config.write_bytes(data)
    before = digest(db)
    result = invoke(command, db, "c", "--config", config, *(["--dry-run"] if command == "condense" else []))
    if result.exit_code == 0:
        return
    refused(result)
    assert digest(db) == before
