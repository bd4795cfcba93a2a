"""A large import's fast path: the input parsed in child processes (``io/parallel.py``), the
indexes with random keys (external ids, response ids) built after the rows
(``Session.defer_event_indexes``), a new file built with a rollback journal (durability
"build"), and ``import --no-search-index``.

Each fast path must store what the plain path stores (rows, ranges, hidden runs, views, files
exported back byte for byte) and fail as it fails: the same error, naming the same file and
line, and nothing written. The inputs are small, so ``parallel=True`` and small batches force
the paths that only large inputs take by default.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openhands_memory.cli import cli  # noqa: F401  (the command line, through test_cli.run)
from openhands_memory.conversation import EventStore
from openhands_memory.inspection import doctor
from openhands_memory.io import sdk
from openhands_memory.io.common import ImportFailed
from openhands_memory.io.importer import import_path
from openhands_memory.io.parallel import Head
from openhands_memory.storage import tree
from openhands_memory.io.jsonl import write_jsonl

from . import factories as f
from .test_cli import run
from .test_io import (
    CONV_ID,
    _corrupt,
    branched_sdk_events,
    condensation_rows,
    file_hash,
    folded,
    payloads,
    ranges_of,
    sdk_events,
    view_shape,
    write_folder,
)

UID_INDEX = "CREATE UNIQUE INDEX ux_event_uid ON event (conversation_id, uid)"
RESPONSE_INDEX = "CREATE INDEX ix_event_response ON event (llm_response_id) WHERE kind = 'ActionEvent'"


def stored(store: EventStore, cid: str) -> tuple:
    return payloads(store, cid), ranges_of(store, cid), condensation_rows(store, cid), \
        view_shape(store.conversation(cid).view())


def deferred_indexes(path: Path) -> list:
    with sqlite3.connect(path) as conn:
        return [r[0] for r in conn.execute("SELECT sql FROM sqlite_master WHERE name IN "
                                           "('ix_event_response', 'ux_event_uid') ORDER BY name")]


def children_left() -> list[int]:
    """This process's children that parse an import (none may outlive it)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            status = (entry / "status").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if f"\nPPid:\t{os.getpid()}\n" in status and b"openhands_memory.io.parallel" in command:
            found.append(int(entry.name))
    return found


def long_jsonl(tmp_path: Path, n: int = 40) -> Path:
    """A conversation of ``n`` tool steps and condensations, exported as JSON Lines."""
    with EventStore(tmp_path / "source.db") as store:
        conv = store.create_conversation("long")
        conv.append_many([f.system(), f.user("go")])
        for i in range(n):
            conv.append_many([f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}")])
            if i % 9 == 8:
                conv.append(f.condensation(ranges=[(2, 2 * i)]))
        path = tmp_path / "long.jsonl"
        with open(path, "w") as out:
            write_jsonl(conv, out)
    return path


@pytest.mark.parametrize("chunk", [1, 4, 2000])
def test_a_folder_parsed_in_children_is_stored_as_in_one_process(tmp_path, chunk):
    folder = write_folder(tmp_path / "conv", sdk_events(), {"id": CONV_ID, "execution_status": "finished"})
    with EventStore(tmp_path / "plain.db") as plain, EventStore(tmp_path / "fast.db") as fast:
        import_path(plain, folder, parallel=False)
        result = import_path(fast, folder, parallel=True, chunk=chunk)
        assert (result.events, result.condensations) == (len(sdk_events()), 1)
        assert stored(fast, CONV_ID) == stored(plain, CONV_ID)
        assert doctor.check(fast, full=True).healthy
        # Exported back, every file is the one imported, byte for byte.
        sdk.export_folder(fast.conversation(CONV_ID), tmp_path / "out")
        for name in (folder / "events").iterdir():
            if name.name.startswith("event-"):
                assert file_hash(tmp_path / "out" / "events" / name.name) == file_hash(name)
    assert deferred_indexes(tmp_path / "fast.db") == [RESPONSE_INDEX, UID_INDEX]


@pytest.mark.parametrize("leaf", ["main", "rewound", "root"])
def test_a_branched_folder_parsed_in_children_keeps_its_tree(tmp_path, leaf):
    events, paths = branched_sdk_events()
    state = {"id": CONV_ID, "leaf_event_id": events[paths[leaf][-1]]["id"], "head_is_empty": False}
    folder = write_folder(tmp_path / "tree", events, state)
    with EventStore(tmp_path / "a.db") as store:
        import_path(store, folder, parallel=True, chunk=3)  # parents in earlier batches, of either child
        conv = store.conversation(CONV_ID)
        assert conv.head == paths[leaf][-1]
        for path in paths.values():
            assert view_shape(conv.view(at=path[-1])) == view_shape(folded(conv, path)), path
        assert doctor.check(store, full=True).healthy


@pytest.mark.parametrize("how", ["json", "field", "kind", "mismatch", "duplicate"])
def test_a_bad_file_parsed_in_a_child_is_named_and_nothing_is_imported(tmp_path, how):
    folder, expected = _corrupt(tmp_path, how)
    db = tmp_path / "a.db"
    with EventStore(db) as store:
        store.create_conversation("keep").append(f.user())
    before = file_hash(db)
    messages = []
    for parallel in (False, True):
        with EventStore(db) as store:
            with pytest.raises(ImportFailed) as info:
                import_path(store, folder, parallel=parallel, chunk=2)
            messages.append(str(info.value))
            assert [c.id for c in store.conversations()] == ["keep"]
        assert file_hash(db) == before
    assert expected in messages[1] and messages[0] == messages[1]


@pytest.mark.parametrize("how", ["gap", "twice", "exists"])
def test_children_started_before_the_names_are_judged_are_stopped_when_the_import_fails(tmp_path, how):
    # The children start while the folder's names are judged: a bad name, or a conversation
    # the database holds already, ends the import before any is sent its job.
    folder, expected = _corrupt(tmp_path, "gap" if how == "exists" else how)
    if how == "exists":
        folder = write_folder(tmp_path / "whole", sdk_events(), {"id": CONV_ID})
        expected = "already exists"
    with EventStore(tmp_path / "a.db") as store:
        if how == "exists":
            store.create_conversation(CONV_ID)
        with pytest.raises(Exception, match=expected):
            import_path(store, folder, parallel=True, chunk=2)
    assert children_left() == []


@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("bad", [None, "fifo", "folder"])
def test_files_opened_ahead_are_read_in_order_and_all_closed(tmp_path, monkeypatch, bad, cached):
    # A folder the page cache does not hold has each file opened (and its read advised) AHEAD
    # files before it is read: with a window shorter than the folder, each file is still read
    # in its place, a bad one is named where it stands, and no descriptor outlives the import.
    # A cached folder is read a file at a time, with the same outcome.
    monkeypatch.setattr(sdk, "AHEAD", 3)
    monkeypatch.setattr(sdk, "_cached", lambda folder, names: cached)
    folder = write_folder(tmp_path / "conv", sdk_events(), {"id": CONV_ID})
    events = sorted(p for p in (folder / "events").iterdir() if p.name.startswith("event-"))
    target = events[len(events) // 2]
    if bad == "fifo":
        target.unlink()
        os.mkfifo(target)  # a reader that waited for a writer would wait forever
    elif bad == "folder":
        target.unlink()
        target.mkdir()
    # Files an earlier test left to the collector are closed first: the import gives the cyclic
    # collector back when it is done, and a collection then would close them mid-count.
    gc.collect()
    open_fds = len(os.listdir("/proc/self/fd"))
    with EventStore(tmp_path / "ahead.db") as store:
        if bad is None:
            import_path(store, folder, parallel=False, chunk=4)
            monkeypatch.setattr(sdk, "AHEAD", 128)
            with EventStore(tmp_path / "plain.db") as plain:
                import_path(plain, folder, parallel=False)
                assert stored(store, CONV_ID) == stored(plain, CONV_ID)
        else:
            with pytest.raises(ImportFailed) as info:
                import_path(store, folder, parallel=False, chunk=4)
            assert target.name in str(info.value) and "not a regular file" in str(info.value)
            assert store.conversations() == []
    # None of the folder's files is still open, and nothing else was left open. (Only "no
    # more than before": a descriptor an earlier test in this process left behind, such as a
    # pooled socket a peer has closed, may be closed meanwhile by another thread.)
    assert [p for p in open_paths() if p.startswith(str(folder))] == []
    assert len(os.listdir("/proc/self/fd")) <= open_fds


def open_paths() -> list[str]:
    """What this process's descriptors point at (those that vanish while read are skipped)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    return out


@pytest.mark.skipif(not hasattr(os, "RWF_NOWAIT"), reason="needs preadv's RWF_NOWAIT (Linux)")
def test_a_folder_is_read_with_advice_only_when_the_page_cache_lacks_it(tmp_path, monkeypatch):
    # On a disk's file system (the tests' own files are on tmpfs, which cannot say what it
    # caches: there the folder is always read with the advice).
    advised: list[str] = []
    real = sdk._open_advised
    monkeypatch.setattr(sdk, "_open_advised", lambda folder, name, path: advised.append(name) or real(folder, name, path))
    disk = Path(tempfile.mkdtemp(dir="/var/tmp"))
    try:
        folder = write_folder(disk / "conv", sdk_events(), {"id": CONV_ID})
        events = folder / "events"
        names = sorted(n for n in os.listdir(events) if n.startswith("event-"))
        fd = os.open(events, os.O_RDONLY)
        try:
            if not sdk._cached(fd, names):
                pytest.skip("/var/tmp's file system cannot say what the page cache holds")
            for name in (names[0], names[-1]):
                with open(events / name, "rb") as file:
                    os.fsync(file.fileno())  # clean pages, which the advice below drops
                    os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            assert not sdk._cached(fd, names)
            with EventStore(tmp_path / "a.db") as store, EventStore(tmp_path / "b.db") as again:
                import_path(store, folder, parallel=False)
                assert sorted(advised) == names and sdk._cached(fd, names)
                import_path(again, folder, parallel=False)
                assert len(advised) == len(names)  # read plainly
                assert stored(store, CONV_ID) == stored(again, CONV_ID)
        finally:
            os.close(fd)
    finally:
        shutil.rmtree(disk)


def test_a_parent_named_out_of_order_is_named_when_children_parse(tmp_path):
    events, _ = branched_sdk_events()
    events[13]["parent_id"] = events[15]["id"]  # a later event: the SDK never writes that
    folder = write_folder(tmp_path / "bad", events, {"id": "bad"})
    with EventStore(tmp_path / "a.db") as store:
        with pytest.raises(ImportFailed, match=r"event-00013-.*is not an earlier event of the folder"):
            import_path(store, folder, parallel=True, chunk=2)
        assert store.conversations() == []


@pytest.mark.parametrize("chunk", [1, 5, 2000])
def test_jsonl_parsed_in_children_round_trips(tmp_path, chunk):
    path = long_jsonl(tmp_path)
    text = path.read_text()
    path.write_text("\ufeff" + text.replace("\n", "\n\n", 3))  # a byte order mark and blank lines
    with EventStore(tmp_path / "plain.db") as plain, EventStore(tmp_path / "fast.db") as fast:
        import_path(plain, path, "c", parallel=False)
        result = import_path(fast, path, "c", parallel=True, chunk=chunk)
        assert result.events == len(text.splitlines())
        assert stored(fast, "c") == stored(plain, "c")
        with EventStore(tmp_path / "source.db") as source:
            assert payloads(fast, "c") == payloads(source, "long")
        out = tmp_path / "again.jsonl"
        with open(out, "w") as o:
            write_jsonl(fast.conversation("c"), o)
        assert out.read_text() == text  # the events come back byte for byte


@pytest.mark.parametrize("line", [3, 8, 10, 23])
@pytest.mark.parametrize("bad", ["kind", "nan", "json", "duplicate"])
def test_a_bad_line_parsed_in_a_child_is_named_and_nothing_is_imported(tmp_path, bad, line):
    lines = long_jsonl(tmp_path).read_text().splitlines()
    if bad == "kind":
        lines[line - 1] = lines[line - 1].replace('"kind":"', '"kind":"Nope', 1)
        expected = rf"bad\.jsonl:{line}: unknown event kind"
    elif bad == "nan":
        lines[line - 1] = lines[line - 1][:-1] + ',"critic_result":{"score":NaN}}'
        expected = rf"bad\.jsonl:{line}:\d+: not valid JSON"
    elif bad == "json":
        lines[line - 1] = lines[line - 1][:-1]
        expected = rf"bad\.jsonl:{line}:\d+: not valid JSON"
    else:
        lines[line - 1] = lines[line - 1].replace(json.loads(lines[line - 1])["id"], json.loads(lines[1])["id"])
        expected = rf"bad\.jsonl:{line}: event id .* appears twice \(first at .*bad\.jsonl:2\)"
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    db = tmp_path / "a.db"
    with EventStore(db) as store:
        store.create_conversation("keep").append(f.user())
    before = file_hash(db)
    for parallel in (False, True):
        with EventStore(db) as store:
            with pytest.raises(ImportFailed, match=expected):
                import_path(store, path, "c", parallel=parallel, chunk=4)
            assert "c" not in store
            if sys.platform == "linux":
                assert children_left() == []  # stopped and reaped when the import failed
        assert file_hash(db) == before


def test_the_random_key_indexes_are_deferred_only_into_an_empty_table_and_restored_on_failure(tmp_path):
    path = long_jsonl(tmp_path)
    db = tmp_path / "a.db"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(path.read_text() + "{not json}\n")
    with EventStore(db) as store:
        with pytest.raises(ImportFailed):
            import_path(store, bad, "c", chunk=5)  # dropped the index, then failed
    assert deferred_indexes(db) == [RESPONSE_INDEX, UID_INDEX]  # the drop was rolled back with the rest
    with EventStore(db) as store:
        with store.writing() as session:  # an empty table: the index goes, and is built again
            assert session.defer_event_indexes() == [RESPONSE_INDEX, UID_INDEX]
            session.build_indexes([RESPONSE_INDEX, UID_INDEX])
        import_path(store, path, "c", chunk=5)
        with store.writing() as session:
            assert session.defer_event_indexes() == []  # rows are there: nothing is dropped
        import_path(store, path, "d", chunk=5)  # a second conversation, the index kept as it goes
        assert payloads(store, "d")[1:] == [(r[0], *r[1:]) for r in payloads(store, "c")][1:]
        assert doctor.check(store, full=True).healthy
    assert deferred_indexes(db) == [RESPONSE_INDEX, UID_INDEX]


def test_a_new_file_is_built_with_a_rollback_journal_and_published_in_wal_mode(tmp_path):
    path = long_jsonl(tmp_path)
    db = tmp_path / "new.db"
    run("import", db, path, "--as", "c")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(("new", ".new"))) == ["new.db"]
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(path.read_text() + "{not json}\n")
    failed = run("import", tmp_path / "other.db", bad, code=1)
    assert "bad.jsonl:" in failed.output
    assert not [p for p in tmp_path.iterdir() if "other" in p.name]  # no file, no journal left


def test_import_without_the_search_index_then_build_it(tmp_path):
    path = long_jsonl(tmp_path)
    db = tmp_path / "new.db"
    out = run("import", db, path, "--as", "c", "--no-search-index").output
    assert f"search-index {db} on" in out
    assert "is off" in run("search-index", db).output
    refusal = run("search", db, "c", "ls", code=1)
    assert "search-index" in refusal.output
    run("search-index", db, "on")
    found = json.loads(run("search", db, "c", "c7", "--scope", "all", "--json").output)
    assert found, found
    with EventStore(db) as store:
        assert doctor.check(store, full=True).healthy
    # A file that keeps an index is not changed by the flag: refused, nothing imported.
    before = file_hash(db)
    refused = run("import", db, path, "--as", "d", "--no-search-index", code=1)
    assert "keeps a search index" in refused.output
    assert file_hash(db) == before
    # One whose index is off takes it as it is.
    run("search-index", db, "off")
    run("import", db, path, "--as", "d", "--no-search-index")
    with EventStore(db) as store:
        assert not store.search_index and len(store.conversation("d")) == len(store.conversation("c"))


def test_both_backends_store_a_parallel_import_as_a_plain_one(database_url, tmp_path):
    path = long_jsonl(tmp_path)
    folder = write_folder(tmp_path / "conv", sdk_events(), {"id": CONV_ID})
    with EventStore(database_url) as store:
        import_path(store, path, "plain", parallel=False)
        import_path(store, path, "fast", parallel=True, chunk=3)
        import_path(store, folder, "folder-plain", parallel=False)
        import_path(store, folder, "folder-fast", parallel=True, chunk=3)
        for plain, fast in (("plain", "fast"), ("folder-plain", "folder-fast")):
            a, b = store.conversation(plain), store.conversation(fast)
            assert [e.to_json() for e in a.events()] == [e.to_json() for e in b.events()]
            assert view_shape(a.view()) == view_shape(b.view())
        assert doctor.check(store, full=True).healthy


def test_a_new_files_pages_are_handed_to_the_disk_as_rows_come_in(tmp_path, monkeypatch):
    """A file being built asks the kernel to write its pages back as it grows (the payload
    bytes inserted pass ``WRITEBACK_BYTES``), not only at the end; an import into an existing
    file leaves that to SQLite's own checkpoints."""
    from openhands_memory import sqlite_file
    from openhands_memory.storage import sqlite as sqlite_storage

    asked: list[str] = []
    start = sqlite_file.Writeback.start

    def spy(writeback: sqlite_file.Writeback) -> None:
        asked.append(writeback.path.name)
        start(writeback)  # the real call, on the real file

    monkeypatch.setattr(sqlite_file.Writeback, "start", spy)
    monkeypatch.setattr(sqlite_storage, "WRITEBACK_BYTES", 4096)
    path = long_jsonl(tmp_path)
    run("import", tmp_path / "new.db", path, "--as", "c")
    assert asked and all(name.startswith(".new.db.") and name.endswith(".building") for name in asked)
    with EventStore(tmp_path / "source.db") as source, EventStore(tmp_path / "new.db") as new:
        assert stored(new, "c") == stored(source, "long")

    asked.clear()
    run("import", tmp_path / "new.db", path, "--as", "again")
    assert asked == []


def test_writeback_leaves_a_file_as_it_was_and_a_missing_one_alone(tmp_path):
    from openhands_memory import sqlite_file

    data = os.urandom(1 << 20)
    target = tmp_path / "f.bin"
    target.write_bytes(data)
    writeback = sqlite_file.Writeback(target)
    writeback.start()
    writeback.start()  # the same descriptor, kept until close
    writeback.close()
    assert target.read_bytes() == data
    missing = sqlite_file.Writeback(tmp_path / "missing.bin")
    missing.start()  # advice only: nothing to say
    missing.close()


def _check_parents_one_by_one(batch: list, seen: set | None) -> set | None:
    """What ``sdk.check_parents`` promises, an event at a time."""
    for item in batch:
        if seen is None:
            break
        event = item[0]
        if event.parent_id not in (None, tree.ROOT_PARENT_ID) and event.parent_id not in seen:
            raise ImportFailed(item[1], "parent")
        if event.id in seen:
            seen = None
        else:
            seen.add(event.id)
    return seen


ids_ = st.sampled_from(["a", "b", "c", "d", "e", "f"])


@st.composite
def parent_batches(draw) -> tuple[list, set]:
    seen = draw(st.sets(ids_, max_size=3))
    chosen = draw(st.lists(ids_, min_size=1, max_size=6))
    linear = draw(st.booleans())
    batch = []
    for k, uid in enumerate(chosen):
        if linear and k:
            parent = chosen[k - 1]
        else:
            parent = draw(st.none() | st.just(tree.ROOT_PARENT_ID) | ids_)
        batch.append((Head(uid, "ActionEvent", parent), f"file-{k}"))
    return batch, seen


@given(parent_batches())
def test_a_folders_parents_are_judged_as_one_by_one_whatever_the_batch(case):
    batch, seen = case
    try:
        expected: object = _check_parents_one_by_one(batch, set(seen))
    except ImportFailed as e:
        expected = ("refused", e.where)
    try:
        got: object = sdk.check_parents(batch, set(seen))
    except ImportFailed as e:
        got = ("refused", e.where)
    assert got == expected


@given(st.lists(st.integers(1, 5), min_size=1, max_size=6), st.data())
def test_a_condensations_forgotten_ids_resolve_to_the_ranges_of_their_earlier_events(sizes, data):
    """However its ids are spread over batches (this one, the one before, older ones, none),
    ``Checker.resolved`` gives the ranges of the ids that name earlier events."""
    from openhands_memory import ranges
    from openhands_memory.io.common import Checker

    checker, names = Checker(), []
    for size in sizes:
        batch = [(Head(f"e{len(names) + k}", "ActionEvent", None), "x") for k in range(size)]
        names += [head.id for head, _ in batch]
        checker.add_batch(batch)
    forget = data.draw(st.lists(st.sampled_from(names + ["gone", f"e{len(names)}"]), max_size=8))
    seq = data.draw(st.integers(0, len(names)))
    got = checker.resolved(f.condensation(forget=forget), seq)
    wanted = ranges.runs_of(sorted({int(n[1:]) for n in forget if n in names and int(n[1:]) < seq}))
    assert list(got.forgotten_ranges or []) == wanted and (got.forgotten_event_ids == [] or not forget)
