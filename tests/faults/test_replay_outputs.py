"""A replay never writes over what it reads, and what it writes is whole or absent: for real,
with hard and symbolic links, small tmpfs mounts filled up, and SQLite files and PostgreSQL.

Before the fix: ``replay DB CONV --html DB`` replaced the source database with the page and
said "Wrote DB." (exit 0); ``--html F`` on a full disk truncated an existing F to a fragment
and printed ``[Errno 28]`` without the path; ``--scratch OTHER.db`` switched the search index
of an existing database off; ``--scratch`` a hard link of the source passed the "same file"
check (it compared names), failed with "disk I/O error" and dropped the source's index, which
``doctor`` then called healthy; and ``--scratch NEW.db`` on a full disk said "nothing was
written" over a NEW.db holding part of a conversation. ``export -o DB --force`` replaced its
own database with JSON Lines.

Every refusal and failure here: exit 1, one ``Error:`` line naming the path, the source and
any existing output byte for byte as they were, ``doctor --full`` healthy, no temporary file
left. A folder that cannot be written (permissions, a read-only mount) is found before the
replay runs (no scratch is made); a disk that fills once it has run gets a line saying what
the scratch database keeps (it said "nothing was written" beside the scratch it had made).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from openhands_memory.conversation import EventStore
from openhands_memory.data import DEMO_CONVERSATION
from openhands_memory.inspection import doctor
from openhands_memory.storage import search

from ..factories import user
from .conftest import REPO, CliRun, run_cli, unprivileged
from .test_disk_full import fill

CONV = "demo"
NOOP = ("-t", "noop")  # the recorded run and one strategy: enough to write every output


#: The bundled agent session's first events, ending on a tool result (no call left open).
EVENTS = 60


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Path:
    """The start of the bundled agent session (its model calls and tool results), as JSONL."""
    path = tmp_path_factory.mktemp("session") / "session.jsonl"
    with open(DEMO_CONVERSATION, encoding="utf-8") as f:
        path.write_text("".join(f.readlines()[:EVENTS]), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def source_file(tmp_path_factory, session) -> Path:
    """The session imported once into an SQLite file, which tests copy."""
    path = tmp_path_factory.mktemp("source") / "source.db"
    run_cli("import", path, session, "--as", CONV).ok()
    return path


def sqlite_source(source_file: Path, folder: Path) -> Path:
    copy = folder / "source.db"
    shutil.copyfile(source_file, copy)
    return copy


@pytest.fixture(params=["sqlite", "postgresql"])
def source(request, source_file, session, tmp_path) -> str:
    """The session in a database of each backend: a file of this test's, or a new database."""
    if request.param == "sqlite":
        return str(sqlite_source(source_file, tmp_path))
    return postgres_source(request.getfixturevalue("postgres_database_factory"), session)


def postgres_source(factory, session: Path) -> str:
    url = factory()
    run_cli("import", url, session, "--as", CONV).ok()
    return url


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fingerprint(db: str) -> str:
    """What a database holds, exactly: a file's bytes (and its WAL's), a server database's
    events and search texts."""
    if "://" not in db:
        wal = Path(f"{db}-wal")
        return digest(Path(db)) + (digest(wal) if wal.exists() else "")
    with EventStore(db, create=False, readonly=True) as store, store.reading() as session:
        rows = session.all("SELECT conversation_id, id, payload FROM event ORDER BY conversation_id, id")
        texts = session.all(f"SELECT conversation_id, id, body FROM {search.PG_TEXTS} ORDER BY conversation_id, id")
    return hashlib.sha256(repr((rows, texts)).encode()).hexdigest()


def healthy(db: str | Path) -> None:
    """``doctor --full`` finds nothing (its checks, run here: a process each costs more)."""
    with EventStore(db, create=False, readonly=True) as store:
        report = doctor.check(store, full=True)
    assert report.healthy, report.problems


def index_on(db: str | Path) -> bool:
    with EventStore(db, create=False, readonly=True) as store:
        return store.search_index


def temporary_files(folder: Path) -> list[str]:
    """What a command may hold only while it runs: partial outputs, databases being built."""
    return sorted(p.name for p in folder.iterdir() if ".partial" in p.name or ".building" in p.name)


def refused(run: CliRun, path: Path | str) -> str:
    line = run.one_error_line()
    assert str(path) in line, line
    return line


# --- outputs: never a file the replay reads ----------------------------------------------------


@pytest.mark.parametrize("option, how", [
    ("--html", "the source"), ("--svg", "a symbolic link to the source"), ("--html", "a hard link of the source"),
    ("--svg", "the source's WAL"), ("--html", "the scratch"), ("--svg", "the config"),
])
def test_an_output_that_is_a_file_the_replay_reads_is_refused(source_file, tmp_path, option, how):
    src = sqlite_source(source_file, tmp_path)
    config = tmp_path / "strategy.toml"
    config.write_text('[condenser]\ntype = "noop"\n')
    scratch = tmp_path / "scratch.db"
    out = {"the source": src, "a symbolic link to the source": tmp_path / "link.db",
           "a hard link of the source": tmp_path / "hard.db", "the source's WAL": Path(f"{src}-wal"),
           "the scratch": scratch, "the config": config}[how]
    if how == "a symbolic link to the source":
        out.symlink_to(src)
    elif how == "a hard link of the source":
        os.link(src, out)
    before = {p: digest(p) for p in (src, config)}
    run = run_cli("replay", src, CONV, "-c", config, "--scratch", scratch, option, out)
    line = refused(run, out)
    assert "which this command reads" in line, line
    assert {p: digest(p) for p in before} == before
    assert not scratch.exists() and not Path(f"{src}-wal").exists() or how == "the source's WAL"
    assert temporary_files(tmp_path) == []
    healthy(src)


def test_a_postgres_replay_never_writes_its_page_over_its_scratch(postgres_database_factory, session, tmp_path):
    url = postgres_source(postgres_database_factory, session)
    before = fingerprint(url)
    scratch = tmp_path / "scratch.db"
    run = run_cli("replay", url, CONV, *NOOP, "--scratch", scratch, "--html", scratch)
    assert "is the database" in refused(run, scratch)
    assert not scratch.exists() and fingerprint(url) == before
    healthy(url)


def test_the_page_and_the_chart_may_not_be_one_file(source_file, tmp_path):
    src = sqlite_source(source_file, tmp_path)
    page = tmp_path / "r.html"
    run = run_cli("replay", src, CONV, *NOOP, "--html", page, "--svg", tmp_path / "." / "r.html")
    refused(run, page)
    assert not page.exists()


# --- outputs: replaced only once whole --------------------------------------------------------


@pytest.mark.parametrize("source, option, existing, free", [
    ("sqlite", "--html", True, 0), ("sqlite", "--html", True, 4096), ("sqlite", "--svg", True, 0),
    ("sqlite", "--html", False, 4096), ("postgresql", "--html", True, 4096),
], indirect=["source"])
def test_a_full_disk_leaves_the_old_output_whole_and_names_it(small_tmpfs, source, option, existing, free):
    """No room at all, or a page of room: the page (some 5 KB) is then written in part, as
    the truncated page was."""
    mount = small_tmpfs(1 << 20)
    out = mount / ("replay.html" if option == "--html" else "chart.svg")
    if existing:
        out.write_text("<!-- the page of an earlier replay -->\n" * 400)  # 16 KB
        old = digest(out)
    fill(mount, free)
    before = fingerprint(source)
    run = run_cli("replay", source, CONV, *NOOP, option, out)
    line = refused(run, out)
    assert "disk is full" in line and "Errno" not in line, line
    assert (digest(out) == old) if existing else not out.exists()
    assert sorted(p.name for p in mount.iterdir()) == sorted(["filler"] + ([out.name] if existing else []))
    assert fingerprint(source) == before
    healthy(source)


def test_a_replaced_page_keeps_its_file_mode_and_a_linked_page_is_written_through(source_file, tmp_path):
    src = sqlite_source(source_file, tmp_path)
    page = tmp_path / "r.html"
    page.write_text("old")
    page.chmod(0o640)
    link = tmp_path / "latest.html"
    link.symlink_to(page)
    run_cli("replay", src, CONV, *NOOP, "--html", link).ok()
    assert link.is_symlink() and page.read_text().startswith("<!DOCTYPE html>")
    assert page.stat().st_mode & 0o777 == 0o640
    assert temporary_files(tmp_path) == []


# --- the scratch database ---------------------------------------------------------------------


def test_a_database_the_replay_did_not_make_is_never_its_scratch(source, source_file, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = sqlite_source(source_file, elsewhere)
    assert index_on(other)
    before, theirs = fingerprint(source), digest(other)
    line = refused(run_cli("replay", source, CONV, *NOOP, "--scratch", other), other)
    assert "a replay did not write" in line and CONV in line, line
    assert digest(other) == theirs and index_on(other)
    assert fingerprint(source) == before
    healthy(other)
    healthy(source)


def test_a_scratch_an_earlier_replay_made_is_used_again(source_file, tmp_path):
    src = sqlite_source(source_file, tmp_path)
    scratch = tmp_path / "scratch.db"
    first = run_cli("replay", src, CONV, *NOOP, "--scratch", scratch, "--json").ok().stdout
    assert not index_on(scratch)  # nothing searches a scratch
    assert run_cli("replay", src, CONV, *NOOP, "--scratch", scratch, "--json").ok().stdout == first
    # One written by an earlier version: replay conversations only, made in a database whose
    # index a replay then switched off. Nothing else in it, so it is taken.
    older = tmp_path / "older.db"
    with EventStore(older) as store:
        store.create_conversation("replay:demo:1", metadata={"replay_of": CONV, "strategy": "noop"})
        store.set_search_index(False)
    assert run_cli("replay", src, CONV, *NOOP, "--scratch", older, "--json").ok().stdout == first
    healthy(older)


@pytest.mark.parametrize("how", ["hard", "symbolic"])
def test_a_link_to_the_source_is_never_the_scratch(source_file, tmp_path, how):
    src = sqlite_source(source_file, tmp_path)
    link = tmp_path / "scratch.db"
    os.link(src, link) if how == "hard" else link.symlink_to(src)
    before = digest(src)
    line = refused(run_cli("replay", src, CONV, *NOOP, "--scratch", link), link)
    assert f"is the database {src} (by another name" in line, line
    assert digest(src) == before and index_on(src)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scratch.db", "source.db"]  # no -wal, no -shm
    healthy(src)


@pytest.mark.parametrize("source, free", [("sqlite", 200_000), ("sqlite", 1_000_000), ("postgresql", 1_000_000)],
                         indirect=["source"])
def test_a_new_scratch_on_a_full_disk_is_removed(small_tmpfs, source, free):
    """200 KB: the new file cannot be made; 1 MB: it is made, and the replay fills the disk."""
    mount = small_tmpfs(3 << 20)
    fill(mount, free)
    scratch = mount / "new.db"
    before = fingerprint(source)
    line = refused(run_cli("replay", source, CONV, *NOOP, "--scratch", scratch), scratch)
    assert "disk is full" in line, line
    assert "was removed" in line or "was not created" in line, line
    assert sorted(p.name for p in mount.iterdir()) == ["filler"]
    assert fingerprint(source) == before
    healthy(source)


def test_an_existing_scratch_on_a_full_disk_is_said_as_it_is(small_tmpfs, source_file, tmp_path):
    src = sqlite_source(source_file, tmp_path)
    mount = small_tmpfs(40 << 20)  # a replay's WAL grows to some MB before its checkpoints
    scratch = mount / "scratch.db"
    run_cli("replay", src, CONV, *NOOP, "--scratch", scratch).ok()
    fill(mount, 300_000)
    line = refused(run_cli("replay", src, CONV, "-t", "noop", "-t", "observation_masking", "--scratch", scratch),
                   scratch)
    assert "disk is full" in line and "nothing was written" not in line, line
    assert "keeps what earlier replays wrote" in line and "unfinished" in line, line
    assert scratch.exists()
    healthy(scratch)


# --- doctor: what the hard-link scratch left, and an index dropped in part ---------------------


WRITE_THROUGH = """
import os, sys
from openhands_memory.conversation import EventStore
from openhands_memory.events import MessageEvent
store = EventStore(sys.argv[1], create=False)
conv = store.conversation("demo")
conv.append(MessageEvent.model_validate({"source": "user", "llm_message": {"role": "user",
            "content": [{"type": "text", "text": "written through another name"}]}}))
os.kill(os.getpid(), 9)  # before any checkpoint: the WAL beside the link keeps the write
"""


def test_doctor_finds_a_wal_kept_beside_another_name_of_the_file(source_file, tmp_path):
    src = sqlite_source(source_file, tmp_path)
    link = tmp_path / "other.db"
    os.link(src, link)
    healthy(src)  # a second name alone is no problem
    done = subprocess.run([sys.executable, "-c", WRITE_THROUGH, str(link)], cwd=REPO, capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == -9, done.stderr
    assert Path(f"{link}-wal").stat().st_size > 0
    run = run_cli("doctor", src, "--full")
    assert run.code == 1 and "is healthy" not in run.stdout, run.stdout
    assert f"another name: {link} is another name (a hard link) of this file" in run.stdout, run.stdout


def test_doctor_finds_a_search_index_dropped_in_part_on_sqlite(source_file, tmp_path):
    src = sqlite_source(source_file, tmp_path)
    conn = sqlite3.connect(src)
    conn.execute(f"DROP TABLE {search.GRAMS}")  # as a drop that stopped after its first table
    conn.commit()
    conn.close()
    out = run_cli("doctor", src, "--full").stdout
    assert f"search: the index is on but incomplete: table(s) {search.GRAMS} missing" in out, out
    run_cli("search-index", src, "off").ok()  # the way the message gives
    run_cli("search-index", src, "on").ok()
    healthy(src)


def test_doctor_finds_events_the_index_was_never_given(database_url):
    """The flush trigger missing while a conversation grew past a flush, then made again (by
    hand, or a copy of an older schema): the existing check sees the trigger again, and the
    index is behind for good."""
    flush_at = search.FLUSH_AT if "://" not in database_url else search.PG_FLUSH_AT
    with EventStore(database_url) as store:
        conv = store.create_conversation("c")
        conv.append_many([user(f"event {i}") for i in range(3)])
        with store.writing() as db:
            db.execute("DROP TRIGGER event_search_flush" + (" ON event" if "://" in database_url else ""))
        conv.append_many([user(f"more {i}") for i in range(flush_at + 5)])
        with store.writing() as db:
            db.execute(search.TRIGGERS[0] if "://" not in database_url else search.PG_TRIGGERS[0])
    run = run_cli("doctor", database_url, "--full")
    assert run.code == 1, run.stdout
    assert "search: the index is behind the events of 1 conversation(s): c (indexed to -1" in run.stdout, run.stdout
    run_cli("search-index", database_url, "off").ok()
    run_cli("search-index", database_url, "on").ok()
    healthy(database_url)


# --- export: the same rules ------------------------------------------------------------------


@pytest.mark.parametrize("how", ["itself", "a hard link"])
def test_export_never_writes_over_its_database(source_file, tmp_path, how):
    src = sqlite_source(source_file, tmp_path)
    out = src if how == "itself" else tmp_path / "hard.db"
    if how == "a hard link":
        os.link(src, out)
    before = digest(src)
    refused(run_cli("export", src, CONV, "-o", out, "--force"), out)
    assert digest(src) == before and temporary_files(tmp_path) == []
    healthy(src)


def test_export_on_a_full_disk_leaves_the_old_file_whole(small_tmpfs, source_file, tmp_path):
    src = sqlite_source(source_file, tmp_path)
    mount = small_tmpfs(1 << 20)
    out = mount / "demo.jsonl"
    out.write_text("{}\n" * 1000)
    old = digest(out)
    fill(mount, 4096)
    line = refused(run_cli("export", src, CONV, "-o", out, "--force"), out)
    assert "disk is full" in line and f"{out} was left as it was" in line, line
    assert digest(out) == old and sorted(p.name for p in mount.iterdir()) == ["demo.jsonl", "filler"]


# --- outputs judged before the replay runs; a failure after it says what the scratch holds ----


@pytest.mark.parametrize("option", ["--html", "--scratch", "export -o"])
def test_a_folder_that_cannot_be_written_is_found_before_anything_runs(source_file, tmp_path, option):
    """A folder without write permission (root's capabilities dropped, so that it applies):
    one line naming the path, nothing created, no scratch left."""
    src = sqlite_source(source_file, tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    out = locked / ("new.db" if option == "--scratch" else "out.html")
    args = (["export", src, CONV, "-o", out] if option == "export -o"
            else ["replay", src, CONV, *NOOP, "--scratch", tmp_path / "scratch.db", "--html", out]
            if option == "--html" else ["replay", src, CONV, *NOOP, "--scratch", out])
    before = digest(src)
    line = refused(run_cli(*args, prefix=unprivileged()), out)
    assert f"the folder {locked} is read-only" in line and line.endswith("nothing was written"), line
    assert list(locked.iterdir()) == [] and not (tmp_path / "scratch.db").exists()
    assert digest(src) == before and temporary_files(tmp_path) == []


def test_a_read_only_mount_is_found_before_anything_runs(small_tmpfs, source_file, tmp_path):
    src = sqlite_source(source_file, tmp_path)
    mount = small_tmpfs(1 << 20)
    subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
    scratch = tmp_path / "scratch.db"
    line = refused(run_cli("replay", src, CONV, *NOOP, "--scratch", scratch, "--html", mount / "r.html"),
                   mount / "r.html")
    assert "read-only file system" in line, line
    assert not scratch.exists() and list(mount.iterdir()) == []


@pytest.mark.parametrize("source", ["sqlite", "postgresql"], indirect=True)
def test_a_page_that_fails_after_the_replay_says_what_the_scratch_holds(small_tmpfs, source, tmp_path):
    """The page's disk fills only once the replay has run (its path was judged writable): the
    line names the page, says it was not written, and what the scratch this replay created
    keeps, which is there and whole."""
    mount = small_tmpfs(1 << 20)
    fill(mount, 0)
    page, scratch = mount / "replay.html", tmp_path / "kept" / "scratch.db"
    scratch.parent.mkdir()
    before = fingerprint(source)
    line = refused(run_cli("replay", source, CONV, *NOOP, "--scratch", scratch, "--html", page), page)
    assert "disk is full" in line and f"{page} was not written" in line, line
    assert f"{scratch}, which this replay created, keeps its conversations" in line, line
    assert not page.exists() and sorted(p.name for p in mount.iterdir()) == ["filler"]
    with EventStore(scratch, create=False, readonly=True) as kept:
        assert sorted(c.id for c in kept.conversations()) == [f"replay:{CONV}:0", f"replay:{CONV}:1"]
    healthy(scratch)
    assert fingerprint(source) == before


def test_a_chart_that_fails_after_the_page_says_both(small_tmpfs, source_file, tmp_path):
    """The page written, then the chart's disk full: the line says the page was written and
    what an existing scratch keeps."""
    src = sqlite_source(source_file, tmp_path)
    scratch = tmp_path / "scratch.db"
    run_cli("replay", src, CONV, *NOOP, "--scratch", scratch).ok()
    mount = small_tmpfs(1 << 20)
    fill(mount, 0)
    page, chart = tmp_path / "r.html", mount / "r.svg"
    line = refused(run_cli("replay", src, CONV, *NOOP, "--scratch", scratch, "--html", page, "--svg", chart), chart)
    assert f"{chart} was not written; {page} was written; {scratch} keeps this replay's conversations" in line, line
    assert page.read_text().startswith("<!DOCTYPE html>") and not chart.exists()
    healthy(scratch)
