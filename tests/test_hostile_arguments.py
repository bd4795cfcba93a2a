"""Hostile arguments to every command: it succeeds, or it fails with one ``Error:`` line and
exit status 1, no traceback, and the database as it was.

Each command has a baseline invocation that succeeds (checked first, so that a refusal below
is the hostile value's doing) and slots of a kind: a database, text, a path, an event id, a
count, a number. Hypothesis puts into one slot at a time what a shell or a script can hand
a program: integers at and past the storage's limits (-2^63-1, 2^63, 2^64, 4,000 digits),
floats that are not finite (nan, inf, 1e309), bytes that are not UTF-8 (as Python hands
them over on POSIX: lone surrogates U+DC80..U+DCFF), NUL, other lone surrogates, strings of
100,000 characters. Runs are in-process (click's CliRunner, fed the strings Python would
have made of the bytes); a few go through a real process with bytes in argv, so that the
decoding itself is tested. PostgreSQL: the commands again, with fewer examples.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from functools import partial
from typing import Iterator

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openhands_memory import migrate
from openhands_memory.cli import COMMANDS, LazyGroup, cli
from openhands_memory.cli.params import MAX_COUNT, MAX_ID, Count, EventId, Number, Text, TextPath
from openhands_memory.condensers import LLMSummarizingCondenser
from openhands_memory.conversation import EventStore

from . import cli_runner
from . import factories as f

REPO = Path(__file__).resolve().parent.parent
CONFIG = '[condenser.small]\ntype = "amortized"\nmax_size = 8\nkeep_first = 2\n'
PINNED = 1  # the task, pinned in the template


# --- the template database -----------------------------------------------------------------


def fill(store: EventStore) -> None:
    """Conversation ``c``: a task, eight tool calls and results, a condensation that hid the
    first ones, and a pin of the task."""
    conv = store.create_conversation("c")
    conv.append_many([f.system(), f.user("Fix the failing parser test")])
    for i in range(8):
        conv.append_many([f.action(f"r{i}", f"c{i}", args={"command": f"pytest -k case{i}"}),
                          f.observation(f"c{i}", f"frobnicate_widget failed {i}")])
    conv.step(LLMSummarizingCondenser(max_size=10, keep_first=2))
    conv.pin(PINNED, "keep", label="task")


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("hostile-arguments")
    with EventStore(folder / "agent.db") as store:
        fill(store)
    conv_line = f.user("one more").model_dump_json(exclude_none=True)
    (folder / "events.jsonl").write_text(conv_line + "\n")
    (folder / "config.toml").write_text(CONFIG)
    return folder


# --- the commands, each as a baseline with slots -------------------------------------------


@dataclass(frozen=True)
class Slot:
    kind: str  # db, text, encoding (text refused for its encoding only), path, id, count, number
    value: str  # the baseline's


Arg = str | Slot
def _nobody_listens() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


NOBODY = _nobody_listens()


def _taken_port() -> "socket.socket":
    """A port this process listens on, on every address: ``serve`` cannot listen there."""
    import socket

    s = socket.socket()
    s.bind(("0.0.0.0", 0))
    s.listen(1)
    return s


TAKEN = _taken_port()
#: Commands whose baseline cannot succeed here, and the one line it ends with instead (serve's
#: would listen for good: its port is taken, so it is refused once every value has passed).
REFUSED_BASELINE = {"sync": "cannot reach the agent server", "serve": "cannot listen on"}
# command -> (options, each a flag alone or with its value; positionals)
INVOCATIONS: dict[str, tuple[list[tuple[Arg, ...]], list[Arg]]] = {
    "init": ([], [Slot("db", "{new}")]),
    "migrate": ([("--dry-run",), ("-r", Slot("text", migrate.HEAD))], [Slot("db", "{db}")]),
    "conversations": ([], [Slot("db", "{db}")]),
    "stats": ([], [Slot("db", "{db}"), Slot("text", "c")]),
    "doctor": ([("--min-age", Slot("number", "600"))], [Slot("db", "{db}")]),
    "sql": ([("--timeout", Slot("number", "30")), ("--max-rows", Slot("count", "5"))],
            [Slot("db", "{db}"), Slot("text", "SELECT id, kind FROM event")]),
    "append": ([], [Slot("db", "{db}"), Slot("text", "c"), Slot("path", "{events}")]),
    "view": ([("--at", Slot("id", "12"))], [Slot("db", "{db}"), Slot("text", "c")]),
    "history": ([("--from", Slot("id", "2")), ("--to", Slot("id", "9"))], [Slot("db", "{db}"), Slot("text", "c")]),
    "import": ([("--as", Slot("text", "imported"))], [Slot("db", "{db}"), Slot("path", "{events}")]),
    "export": ([("-o", Slot("path", "out.jsonl"))], [Slot("db", "{db}"), Slot("text", "c")]),
    "branches": ([], [Slot("db", "{db}"), Slot("text", "c")]),
    "navigate": ([], [Slot("db", "{db}"), Slot("text", "c"), Slot("id", "5")]),
    "fork": ([("--at", Slot("id", "6")), ("--as", Slot("text", "copy"))], [Slot("db", "{db}"), Slot("text", "c")]),
    "condense": ([("--dry-run",), ("-t", Slot("encoding", "amortized")), ("-s", Slot("text", "max_size=8"))],
                 [Slot("db", "{db}"), Slot("text", "c")]),
    "request-condensation": ([], [Slot("db", "{db}"), Slot("text", "c")]),
    "pin": ([("-l", Slot("text", "plan")), ("-g", Slot("text", "g")), ("--budget", Slot("count", "100000"))],
            [Slot("db", "{db}"), Slot("text", "c"), Slot("id", "17")]),
    "unpin": ([], [Slot("db", "{db}"), Slot("text", "c"), Slot("id", str(PINNED))]),
    "pins": ([("--at", Slot("id", "19"))], [Slot("db", "{db}"), Slot("text", "c")]),
    "search": ([("--scope", "all"), ("--tool", Slot("text", "terminal")), ("--kind", Slot("text", "observation")),
                ("--after", Slot("text", "2000-01-01")), ("-n", Slot("count", "3"))],
               [Slot("db", "{db}"), Slot("text", "c"), Slot("text", "frobnicate_widget")]),
    "show": ([("-w", Slot("count", "2")), ("--max-chars", Slot("count", "500"))],
             [Slot("db", "{db}"), Slot("text", "c"), Slot("id", "4")]),
    # --model, --tokenizer and --llm name what litellm may fetch or call: only values refused
    # before any use go there. (The output paths, --scratch, --html and --svg, are
    # test_replay's.)
    "replay": ([("-c", Slot("path", "{config}")), ("--name", Slot("text", "small")),
                ("--model", Slot("encoding", "gpt-4o")), ("--tokenizer", Slot("encoding", "gpt-4o")),
                ("--max-cost", Slot("number", "0.5"))],
               [Slot("db", "{db}"), Slot("text", "c")]),
    "search-index": ([], [Slot("db", "{db}")]),
    "demo": ([], [Slot("encoding", "demo.db")]),
    # No agent server listens at the baseline's address (tests/test_agent_server.py syncs from
    # a real one): the baseline is refused in one line, and so is every value, DB untouched.
    # The address takes only values refused for their encoding, which reach no network.
    # The port is no slot: any other value (0: a free one) would listen for good.
    "serve": ([("--host", Slot("encoding", "127.0.0.1")), ("--port", str(TAKEN.getsockname()[1]))],
              [Slot("db", "{db}")]),
    "sync": ([("--agent-server", Slot("encoding", f"http://127.0.0.1:{NOBODY}")), ("--api-key", Slot("text", "k"))],
             [Slot("db", "{db}"), Slot("text", "8179c999-46f3-46c5-aa47-6d7f4ea353f2")]),
}
# The slot each --condense variant of the config reads: condense's --config and --name.
CONDENSE_CONFIG = ([("--dry-run",), ("-c", Slot("path", "{config}")), ("--name", Slot("text", "small"))],
                   [Slot("db", "{db}"), Slot("text", "c")])


def slots(spec: tuple[list[tuple[Arg, ...]], list[Arg]]) -> list[tuple[str, int, int]]:
    """(where, i, j) of every slot: ("option", option i, its value j) or ("positional", i, 0)."""
    options, positionals = spec
    out = [("option", i, j) for i, o in enumerate(options) for j, a in enumerate(o) if isinstance(a, Slot)]
    return out + [("positional", i, 0) for i, a in enumerate(positionals) if isinstance(a, Slot)]


def argv(command: str, spec: tuple[list[tuple[Arg, ...]], list[Arg]], places: dict[str, str],
         hole: tuple[str, int, int] | None = None, value: str = "") -> list[str]:
    """The command line: options first, then ``--`` and the positionals (so that a hostile
    value starting with "-" is still a value); ``value`` in the slot ``hole``."""
    options, positionals = spec

    def filled(a: Arg, where: tuple[str, int, int]) -> str:
        if where == hole:
            return value
        text = a.value if isinstance(a, Slot) else a
        return text.format(**places)

    out = [command]
    for i, option in enumerate(options):
        out += [filled(a, ("option", i, j)) for j, a in enumerate(option)]
    return out + ["--"] + [filled(a, ("positional", i, 0)) for i, a in enumerate(positionals)]


# --- hostile values --------------------------------------------------------------------------


INT_EDGES = [-(2**63) - 1, -(2**63), -1, 0, 2**31, MAX_ID, MAX_ID + 1, 2**63 - 1, 2**63, 2**64, MAX_COUNT + 1,
             10**30]
FLOAT_WORDS = ["1e300", "-1e300", "1e309", "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e-320", "-0", "0.5",
               "1_000", " 7 ", "0x10", "9" * 4400]


def _not_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


# Bytes that are not UTF-8, as Python hands them to a program on POSIX (surrogateescape).
NOT_UTF8 = st.binary(min_size=1, max_size=16).filter(_not_utf8).map(lambda b: b.decode("utf-8", "surrogateescape"))
WITH_NUL = st.tuples(st.text(max_size=8), st.text(max_size=8)).map(lambda p: f"{p[0]}\x00{p[1]}")
LONE_SURROGATE = st.tuples(st.text(max_size=8), st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)).map(
    lambda p: p[0] + p[1])
# Up to what Linux lets one argument be (128 KiB).
HUGE = st.tuples(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                 st.integers(10_000, 32_000)).map(lambda p: p[0] * p[1])
# and text that does not compress: PostgreSQL's index on a conversation's id holds 8 KB of it
NOISE = st.integers(0, 2**32).map(
    lambda seed: "".join(map(chr, random.Random(seed).choices(range(0x4E00, 0x9FFF), k=12_000))))
ENCODING = st.one_of(NOT_UTF8, WITH_NUL, LONE_SURROGATE)
TEXT = st.one_of(ENCODING, HUGE, NOISE, st.text(max_size=40))
INTEGERS = st.one_of(st.sampled_from(INT_EDGES), st.integers()).map(str)
NUMBERS = st.one_of(INTEGERS, st.sampled_from(FLOAT_WORDS), st.floats().map(repr))
HOSTILE = {
    # never a server URL: a database named by a random string must not reach for the network
    "db": TEXT.filter(lambda v: "://" not in v),
    "text": TEXT,
    "encoding": ENCODING,
    "path": TEXT,
    "id": st.one_of(NUMBERS, TEXT),
    "count": st.one_of(NUMBERS, TEXT),
    "number": st.one_of(NUMBERS, TEXT),
}


# --- what every run must end as ---------------------------------------------------------------


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "absent"


def files_in(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


# Every run's result as it came, an escaped exception included (clean_outcome shows it), and
# no model named by the user's environment.
invoke = partial(cli_runner.invoke, env=cli_runner.NO_MODEL_SETTINGS, catch_exceptions=True)


def clean_outcome(result) -> None:
    """Exit 0; or exit 1 with one line on stderr, ``Error: …``, and nothing on stdout. Never a
    traceback, whatever the exit status."""
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    assert "Traceback" not in result.output
    if result.exit_code == 0:
        return
    lines = result.stderr.splitlines()
    assert result.exit_code == 1, f"exit {result.exit_code}: {result.output[:500]}"
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr[:500]
    assert result.stdout == "", result.stdout[:500]


@contextmanager
def workspace(template: Path, tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A fresh copy of the template in its own folder, which is also the working directory
    (a hostile path is relative to it)."""
    folder = Path(os.path.realpath(tmp_path)) / os.urandom(6).hex()
    shutil.copytree(template, folder)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        yield folder, {"db": str(folder / "agent.db"), "events": str(folder / "events.jsonl"),
                       "config": str(folder / "config.toml"), "new": str(folder / "new.db")}
    finally:
        os.chdir(cwd)
        shutil.rmtree(folder, ignore_errors=True)


def check_run(folder: Path, db_state, args: list[str]) -> None:
    before, around = db_state(), files_in(folder)
    result = invoke(*args)
    clean_outcome(result)
    if result.exit_code != 0:
        assert db_state() == before, args
        assert files_in(folder) == around, args


# --- the tests -------------------------------------------------------------------------------

CASES = [(name, INVOCATIONS[name]) for name in INVOCATIONS] + [("condense", CONDENSE_CONFIG)]
CASE_IDS = [name for name in INVOCATIONS] + ["condense-config"]


def test_every_command_is_tried():
    assert set(INVOCATIONS) == set(COMMANDS)


@pytest.mark.parametrize("command, spec", CASES, ids=CASE_IDS)
def test_the_baseline_succeeds(template, tmp_path, command, spec):
    """The control: each baseline, as written, runs, so a refusal below is the value's."""
    with workspace(template, tmp_path) as (folder, places):
        result = invoke(*argv(command, spec, places))
        if command in REFUSED_BASELINE:
            clean_outcome(result)
            assert result.exit_code == 1 and REFUSED_BASELINE[command] in result.stderr, result.output[-2000:]
            return
        assert result.exit_code == 0, result.output[-2000:]


def examples_for(command: str) -> int:
    return {"demo": 6, "replay": 8}.get(command, 25)


@pytest.mark.parametrize("command, spec", CASES, ids=CASE_IDS)
def test_hostile_values_end_cleanly(template, tmp_path, command, spec):
    holes = slots(spec)
    options, positionals = spec

    def kind(hole: tuple[str, int, int]) -> str:
        where, i, j = hole
        a = options[i][j] if where == "option" else positionals[i]
        assert isinstance(a, Slot)
        return a.kind

    @settings(max_examples=examples_for(command), deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(data=st.data())
    def run(data):
        hole = data.draw(st.sampled_from(holes), label="slot")
        value = data.draw(HOSTILE[kind(hole)], label="value")
        with workspace(template, tmp_path) as (folder, places):
            check_run(folder, lambda: digest(folder / "agent.db"), argv(command, spec, places, hole, value))

    run()


@pytest.mark.parametrize("args, says", [
    (["show", "{db}", "c", str(2**63)], "'SEQ': '9223372036854775808' is not an event id"),
    (["pin", "{db}", "c", str(2**64)], "'SEQ': '18446744073709551616' is not an event id"),
    (["unpin", "{db}", "c", str(2**63)], "'SEQ': '9223372036854775808' is not an event id"),
    (["history", "{db}", "c", "--from", str(2**63)], "'--from': '9223372036854775808' is not an event id"),
    (["navigate", "{db}", "c", "--", str(-(2**63) - 1)], "'[SEQ]': '-9223372036854775809' is not an event id"),
    (["fork", "{db}", "c", "--at", str(MAX_ID + 1)], "'--at': '4611686018427387904' is not an event id"),
    (["search", "{db}", "c", "x", "--limit", str(2**61)],
     "'-n' / '--limit': '2305843009213693952' is not a whole number from 1 to 1,000,000,000"),
    (["show", "{db}", "c", "3", "--window", "-1"], "'-w' / '--window': '-1' is not a whole number from 0"),
    (["sql", "{db}", "SELECT 1", "--timeout", "nan"], "'--timeout': 'nan' is not a finite number above 0"),
    (["replay", "{db}", "c", "--max-cost", "inf"], "'--max-cost': 'inf' is not a finite number from 0"),
    (["doctor", "{db}", "--min-age", "1e309"], "'--min-age': '1e309' is not a finite number from 0"),
    (["search", "{db}", "c", "x\udcffy"], "'QUERY': 'x\\udcffy' is not UTF-8 text (byte 0xff at character 1)"),
    (["view", "{db}", "c\udcc3"], "'CONV': 'c\\udcc3' is not UTF-8 text (byte 0xc3 at character 1)"),
    (["search", "{db}", "c", "x", "--tool", "\udcff"], "'--tool': '\\udcff' is not UTF-8 text"),
    (["pin", "{db}", "c", "3", "--label", "a\udcfe"], "'-l' / '--label': 'a\\udcfe' is not UTF-8 text"),
    (["pin", "{db}", "c", "3", "--group", "\ud800"], "'-g' / '--group': '\\ud800' holds a lone surrogate (U+D800"),
    (["fork", "{db}", "c", "--as", "new\udce9"], "'--as': 'new\\udce9' is not UTF-8 text"),
    (["search", "{db}", "c", "a\x00b"], "'QUERY': 'a\\x00b' holds a NUL character"),
    (["view", "{db}\udcff", "c"], "'DB': "),
])
def test_each_refusal_names_the_argument_and_what_it_takes(template, tmp_path, args, says):
    with workspace(template, tmp_path) as (folder, places):
        before = digest(folder / "agent.db")
        result = invoke(*(a.format(**places) if "{" in a else a for a in args))
        clean_outcome(result)
        assert result.exit_code == 1 and says in result.stderr, result.stderr
        assert digest(folder / "agent.db") == before


def test_counts_and_ids_at_their_limits_are_taken(template, tmp_path):
    """The limits themselves are values like any other: the largest id is no event (one
    line), the largest count is taken."""
    with workspace(template, tmp_path) as (folder, places):
        db = places["db"]
        for args in (["search", db, "c", "frobnicate_widget", "--scope", "all", "--limit", str(MAX_COUNT)],
                     ["show", db, "c", "4", "--window", str(MAX_COUNT), "--max-chars", str(MAX_COUNT)],
                     ["history", db, "c", "--from", "0", "--to", str(MAX_ID)],
                     ["sql", db, "SELECT 1", "--max-rows", str(MAX_COUNT), "--timeout", "2147483"]):
            assert invoke(*args).exit_code == 0, args
        result = invoke("show", db, "c", MAX_ID)
        assert result.exit_code == 1 and result.stderr == f"Error: conversation 'c' has no event {MAX_ID}\n"


def test_every_argument_is_one_of_the_checked_kinds():
    """A new option must say what it takes (cli/params.py): a bare str or int would let a
    hostile value through to the library."""
    group = LazyGroup()
    ctx = click.Context(cli)
    checked = (Text, TextPath, EventId, Count, Number, click.Choice, click.types.BoolParamType)
    for name in COMMANDS:
        command = group.get_command(ctx, name)
        assert command is not None
        for param in command.params:
            if isinstance(param, click.Option) and param.is_flag:
                continue
            assert isinstance(param.type, checked), f"{name} {param.name}: {param.type!r}"


# --- a real process: the bytes as the system hands them ---------------------------------------


@pytest.mark.parametrize("args, says", [
    ([b"search", b"{db}", b"c", b"x\xffy"], b"Error: Invalid value for 'QUERY': 'x\\udcffy' is not UTF-8 text"),
    ([b"pin", b"{db}", b"c", b"3", b"--label", b"\xc3("], b"Error: Invalid value for '-l' / '--label':"),
    ([b"fork", b"{db}", b"c", b"--as", b"\xfe\xff"], b"Error: Invalid value for '--as':"),
    ([b"view", b"{db}\xff", b"c"], b"Error: Invalid value for 'DB':"),
    ([b"show", b"{db}", b"c", str(2**63).encode()], b"Error: Invalid value for 'SEQ': '9223372036854775808'"),
])
def test_bytes_in_argv_through_a_real_process(template, tmp_path, args, says):
    with workspace(template, tmp_path) as (folder, places):
        db = places["db"].encode()
        before = digest(folder / "agent.db")
        done = subprocess.run([sys.executable, str(REPO / "cli.py"), *(a.replace(b"{db}", db) for a in args)],
                              capture_output=True, cwd=folder, env={**os.environ, "COLUMNS": "80", "LC_ALL": "C.UTF-8"},
                              timeout=120)
        assert done.returncode == 1, done.stderr
        assert done.stdout == b"" and done.stderr.count(b"\n") == 1 and done.stderr.startswith(says), done.stderr
        assert digest(folder / "agent.db") == before


# --- PostgreSQL --------------------------------------------------------------------------------


def pg_state(url: str) -> str:
    """A hash of every row of every table: what a failed command must leave as it was."""
    import psycopg

    h = hashlib.sha256()
    with psycopg.connect(url) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1")]
        for table in tables:
            row = conn.execute(f'SELECT count(*), md5(coalesce(string_agg(t::text, \'|\' ORDER BY t::text), \'\')) '
                               f'FROM "{table}" AS t').fetchone()
            h.update(f"{table}:{row[0]}:{row[1]};".encode())
    return h.hexdigest()


@pytest.fixture(scope="module")
def pg_template(postgres_database_factory):
    url = postgres_database_factory()
    with EventStore(url) as store:
        fill(store)
    return url


PG_CASES = [(n, s) for n, s in zip(CASE_IDS, [c[1] for c in CASES]) if n not in ("init", "demo")]


@pytest.mark.parametrize("command, spec", PG_CASES, ids=[n for n, _ in PG_CASES])
def test_hostile_values_end_cleanly_on_postgresql(template, pg_template, postgres_database_factory, tmp_path,
                                                  command, spec):
    url = postgres_database_factory(pg_template)
    holes = slots(spec)
    options, positionals = spec
    name = "condense" if command == "condense-config" else command

    def kind(hole: tuple[str, int, int]) -> str:
        where, i, j = hole
        a = options[i][j] if where == "option" else positionals[i]
        assert isinstance(a, Slot)
        return a.kind

    with workspace(template, tmp_path) as (folder, places):
        places = {**places, "db": url}
        control = invoke(*argv(name, spec, places))  # the control, on this server
        assert control.exit_code == (1 if name in REFUSED_BASELINE else 0), control.output[-2000:]

        @settings(max_examples=8, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
        @given(data=st.data())
        def run(data):
            hole = data.draw(st.sampled_from(holes), label="slot")
            value = data.draw(HOSTILE[kind(hole)], label="value")
            check_run(folder, lambda: pg_state(url), argv(name, spec, places, hole, value))

        run()
