"""Every path a command writes is judged before the command does anything (files.check_output):
``replay --html/--svg/--scratch`` and ``export -o`` (a file, or an SDK folder) with a name no
file can have there end in one ``Error:`` line naming the option and the path, exit 1, and
nothing created: no scratch database, no partial file, the source as it was.

Before: ``--html`` of 10,000 slashes (or ``""``, or ``.``) was a ValueError traceback from
``with_name``; ``--html`` of a 300-character name failed only after the whole replay had run,
leaving the ``--scratch`` database it had created behind without saying so; ``--html out/``
wrote a file named ``out``; ``--scratch`` of a 250-byte name failed naming the temporary file
it was building, not the path given; ``--html /dev/null`` (run as root) renamed the page over
the device, leaving a regular file in its place (tried here on a pipe of the test's own). The
faults a file system injects (a full disk, a read-only folder or mount) are
tests/faults/test_replay_outputs.py's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from openhands_memory.cli import cli
from openhands_memory.conversation import EventStore
from openhands_memory.errors import UnwritableOutput
from openhands_memory.files import LONGEST_COMPANION, NAME_MAX, check_output, replace_whole, sibling, write_text

from . import factories as f

CONV = "demo"


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A short agent session (model calls and tool results) in an SQLite file."""
    path = tmp_path_factory.mktemp("outputs") / "source.db"
    with EventStore(path) as store:
        conv = store.create_conversation(CONV)
        conv.append_many([f.system(), f.user("Fix the parser")])
        for i in range(4):
            conv.append_many([f.action(f"r{i}", f"c{i}", args={"command": f"pytest -k {i}"}),
                              f.observation(f"c{i}", f"failed {i}")])
    return path


@pytest.fixture
def folder(template, tmp_path) -> Path:
    """A working folder holding a copy of the source, a file and an empty subfolder."""
    work = Path(os.path.realpath(tmp_path)) / "work"
    work.mkdir()
    shutil.copyfile(template, work / "source.db")
    (work / "notes.txt").write_text("not a folder")
    (work / "empty").mkdir()
    os.mkfifo(work / "pipe")
    return work


def listing(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with a digest of its bytes: what a refusal must not change."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "other"
            for p in sorted(folder.rglob("*"))}


def run(folder: Path, *args: str):
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        return CliRunner().invoke(cli, list(args), env={"COLUMNS": "80", "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    finally:
        os.chdir(cwd)


#: Paths no output can be written at, each with what the message must say.
HOSTILE = {
    "10,000 slashes": ("/" * 10_000, "it names a folder, not a file"),
    "empty": ("", "it is empty, which names no file"),
    "ends in a slash": ("out/", "it names a folder, not a file"),
    "dot-dot": ("nowhere/..", "it names a folder, not a file"),
    "a 300-byte name": ("n" * 300, f"is 300 bytes, more than the {NAME_MAX} a file name may have here"),
    "a 4,200-byte path": ("a/" * 2100 + "x", "a path may have"),
    "a missing folder": ("missing/out.html", "the folder missing does not exist"),
    "a file as a folder": ("notes.txt/out.html", "notes.txt is not a folder"),
    "an existing folder": ("empty", "it is a folder"),
    # (a pipe of the test's own: were the check to fail, the page would be renamed over it,
    # as it would over /dev/null, which a test must never risk)
    "a pipe": ("pipe", "it is not a regular file"),
    "a symbolic link loop": ("loop", "it cannot be reached (Too many levels of symbolic links)"),
}
OPTIONS = {
    "--html": lambda p: ["replay", "source.db", CONV, "-t", "noop", "--scratch", "scratch.db", "--html", p],
    "--svg": lambda p: ["replay", "source.db", CONV, "-t", "noop", "--scratch", "scratch.db", "--svg", p],
    "--scratch": lambda p: ["replay", "source.db", CONV, "-t", "noop", "--scratch", p],
    "export -o": lambda p: ["export", "source.db", CONV, "-o", p, "--force"],
}


@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize("name", HOSTILE)
def test_a_path_no_file_can_have_is_refused_before_anything_runs(folder, option, name):
    path, says = HOSTILE[name]
    if name == "a symbolic link loop":
        (folder / "loop").symlink_to("loop")
    before = listing(folder)
    result = run(folder, *OPTIONS[option](path))
    if option in ("--html", "--svg", "--scratch") and name == "an existing folder":
        says = "is a directory"  # click's own check of an existing folder comes first
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and says in lines[0], lines
    assert option.split()[-1] in lines[0] or says == "is a directory", lines[0]
    assert listing(folder) == before  # no scratch, no partial file, the source unchanged


def test_an_sdk_folder_export_is_judged_as_a_folder(folder):
    before = listing(folder)
    for path, says in (("n" * 300, "more than the"), ("missing/conv", "the folder missing does not exist"),
                       ("notes.txt/conv", "notes.txt is not a folder"), ("", "it is empty")):
        result = run(folder, "export", "source.db", CONV, "--file-format", "openhands", "-o", path)
        assert result.exit_code == 1 and says in result.stderr and len(result.stderr.splitlines()) == 1, result.output
        assert listing(folder) == before
    assert run(folder, "export", "source.db", CONV, "--file-format", "openhands", "-o", "conv/").exit_code == 0
    assert (folder / "conv" / "base_state.json").is_file()


def test_the_longest_scratch_name_that_leaves_room_for_its_journal_is_taken(folder):
    longest = "s" * (NAME_MAX - LONGEST_COMPANION)
    result = run(folder, "replay", "source.db", CONV, "-t", "noop", "--scratch", longest)
    assert result.exit_code == 0, result.output
    assert (folder / longest).is_file() and not [p for p in folder.iterdir() if ".building" in p.name]
    result = run(folder, "replay", "source.db", CONV, "-t", "noop", "--scratch", longest + "s")
    assert result.exit_code == 1 and "SQLite's -journal beside it" in result.stderr, result.output


def test_a_page_with_a_long_name_is_written_beside_under_a_short_temporary_name(folder):
    """A 250-byte name: its temporary name (``.NAME.PID-RANDOM.partial``) is cut to fit."""
    page = folder / ("p" * 250)
    assert run(folder, "replay", "source.db", CONV, "-t", "noop", "--html", page.name).exit_code == 0
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert len(os.fsencode(sibling(page, "partial").name)) + LONGEST_COMPANION <= NAME_MAX


# --- the library's own calls ----------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in HOSTILE if n not in ("an existing folder",)])
def test_check_output_names_the_path_and_why(folder, name):
    path, says = HOSTILE[name]
    if name == "a symbolic link loop":
        (folder / "loop").symlink_to("loop")
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with pytest.raises(UnwritableOutput) as refused:
            check_output(path, what="--out")
    finally:
        os.chdir(cwd)
    text = str(refused.value)
    assert says in text and text.startswith("--out") and text.endswith("nothing was written"), text
    assert "\n" not in text and len(text) < 700, text


@pytest.mark.parametrize("path, says", [
    ("a\0b", "holds a NUL character"), ("x\ud800", "lone surrogate"),
])
def test_check_output_refuses_what_no_name_can_hold(path, says):
    with pytest.raises(UnwritableOutput, match=says):
        check_output(path)


def test_replace_whole_raises_the_librarys_error_not_a_value_error(folder):
    """``with_name`` on ``/`` (what ``Path`` makes of 10,000 slashes) was a bare ValueError."""
    before = listing(folder)
    for path in (Path("/" * 10_000), Path(""), folder / "missing" / "x.html"):
        with pytest.raises(UnwritableOutput):
            write_text(path, "page")
    with pytest.raises(UnwritableOutput, match="the folder .*missing does not exist; .*keeps its conversations"):
        replace_whole(folder / "missing" / "x.html", lambda out: out.write("page"),
                      done="scratch.db, which this replay created, keeps its conversations")
    assert listing(folder) == before


def test_a_dangling_link_is_written_through_to_its_target(folder):
    (folder / "latest.html").symlink_to(folder / "pages" / "r1.html")
    with pytest.raises(UnwritableOutput, match="pages does not exist"):
        check_output(folder / "latest.html")
    (folder / "pages").mkdir()
    assert check_output(folder / "latest.html") == folder / "latest.html"
    write_text(folder / "latest.html", "page")
    assert (folder / "pages" / "r1.html").read_text() == "page" and (folder / "latest.html").is_symlink()
