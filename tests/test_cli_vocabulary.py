"""One vocabulary across the command line: every command is walked, and each short flag and
each long option means one thing wherever it appears (one long name, one kind of value);
every command prints text or JSON by ``--format`` and ``--json``; docs/guide.md's vocabulary
table says what each is and where. The old spellings still work, each saying once on stderr
what to write instead, never on stdout; the new ones say nothing."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import click
import pytest

from openhands_memory.cli import COMMANDS, LazyGroup, cli
from openhands_memory.cli.vocabulary import FormatChoice
from openhands_memory.condensers import LLMSummarizingCondenser
from openhands_memory.conversation import EventStore

from . import factories as f
from .cli_runner import invoke

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guide.md"
CONFIG = '[condenser]\ntype = "recent"\nmax_events = 6\n\n[condenser.small]\ntype = "amortized"\nmax_size = 8\nkeep_first = 2\n'


def commands() -> dict[str, click.Command]:
    group, ctx = LazyGroup(), click.Context(cli)
    found = {name: group.get_command(ctx, name) for name in COMMANDS}
    assert all(found.values())
    return found  # type: ignore[return-value]


def options(command: click.Command, *, hidden: bool = False) -> list[click.Option]:
    """The command's options (``hidden``: the old spellings instead), --help left out."""
    return [p for p in command.params if isinstance(p, click.Option) and p.name != "help" and p.hidden == hidden]


def longs(option: click.Option) -> list[str]:
    return [o for o in option.opts + option.secondary_opts if o.startswith("--")]


def shorts(option: click.Option) -> list[str]:
    return [o for o in option.opts + option.secondary_opts if not o.startswith("--")]


def kind_of(command: click.Command, option: click.Option) -> tuple:
    """What an option takes: a flag or not, the type (its bounds, its choices), the metavar
    its help shows. --format's choices differ by command (csv, messages) and are not compared;
    that it always offers text and json is its own test."""
    info = option.type.to_info_dict()
    if isinstance(option.type, FormatChoice):
        return (False, "format")
    ctx = click.Context(command)
    return (option.is_flag, json.dumps(info, sort_keys=True, default=str), option.make_metavar(ctx))


# --- the vocabulary, walked ------------------------------------------------------------------


def test_a_short_flag_is_one_option_everywhere():
    meaning: dict[str, set[str]] = {}
    for name, command in commands().items():
        for option in options(command):
            for short in shorts(option):
                meaning.setdefault(short, set()).update(longs(option))
    assert {s: m for s, m in meaning.items() if len(m) != 1} == {}
    assert meaning["-c"] == {"--config"} and meaning["-n"] == {"--limit"}


def test_a_long_option_takes_one_kind_of_value_everywhere():
    kinds: dict[str, dict[tuple, list[str]]] = {}
    for name, command in commands().items():
        for option in options(command):
            assert len(longs(option)) == 1, f"{name}: {option.opts}"
            kinds.setdefault(longs(option)[0], {}).setdefault(kind_of(command, option), []).append(name)
    assert {o: k for o, k in kinds.items() if len(k) != 1} == {}


def test_every_command_prints_text_or_json_by_format_and_json():
    for name, command in commands().items():
        by_name = {longs(o)[0]: o for o in options(command)}
        fmt, as_json = by_name.get("--format"), by_name.get("--json")
        assert fmt is not None and as_json is not None, name
        assert isinstance(fmt.type, FormatChoice) and {"text", "json"} <= set(fmt.type.choices), name
        assert fmt.default == "text" and as_json.is_flag, name


def test_no_old_spelling_is_a_current_one_of_the_same_command():
    for name, command in commands().items():
        current = {o for option in options(command) for o in option.opts}
        old = {o for option in options(command, hidden=True) for o in option.opts}
        assert not current & old, name


# --- the guide's tables ------------------------------------------------------------------------


def table_rows(heading_text: str, which: int) -> list[list[str]]:
    """The cells of the ``which``-th table under ``heading_text`` in the guide."""
    section = GUIDE.read_text().split(f"\n{heading_text}\n", 1)[1].split("\n## ", 1)[0]
    tables = re.findall(r"((?:^\|.*\|\n)+)", section, re.M)
    rows = [re.split(r"(?<!\\)\|", line.strip())[1:-1] for line in tables[which].splitlines()[2:]]
    return [[c.strip() for c in row] for row in rows]


def flags_in(cell: str) -> list[str]:
    return re.findall(r"`(--?[A-Za-z][\w-]*)", cell)


def named_commands(cell: str) -> set[str]:
    return set(COMMANDS) if cell == "every command" else {c.strip() for c in cell.split(",")}


def test_the_guides_vocabulary_table_names_every_option_and_where_it_is():
    documented: dict[str, set[str]] = {}
    pairs: set[tuple[str, str]] = set()
    for cells in table_rows("### One name, one meaning", 0):
        flags = flags_in(cells[0])
        for i, flag in enumerate(flags):
            if flag.startswith("--"):
                documented.setdefault(flag, set()).update(named_commands(cells[2]))
            else:
                pairs.add((flag, flags[i + 1]))
    actual: dict[str, set[str]] = {}
    actual_pairs: set[tuple[str, str]] = set()
    for name, command in commands().items():
        for option in options(command):
            actual.setdefault(longs(option)[0], set()).add(name)
            actual_pairs.update((s, longs(option)[0]) for s in shorts(option))
    assert documented == actual
    assert pairs == actual_pairs


def test_the_guides_table_of_old_spellings_is_every_hidden_option():
    documented = set()
    for cells in table_rows("### One name, one meaning", 1):
        for flag in flags_in(cells[0]):
            documented.update((command, flag) for command in named_commands(cells[2]))
    hidden = {(name, o) for name, command in commands().items() for option in options(command, hidden=True)
              for o in option.opts}
    current = {(name, o) for name, command in commands().items() for option in options(command) for o in option.opts}
    # the rest are old values of current options: --format table, --config FILE:NAME, ...
    assert documented - current == hidden


# --- the old spellings, run ----------------------------------------------------------------------


def fill(store: EventStore) -> None:
    """Conversation ``c`` (a task, tool calls and results, a condensation that hid the first
    ones) and a short ``d``."""
    conv = store.create_conversation("c")
    conv.append_many([f.system(), f.user("Fix the failing parser test")])
    for i in range(8):
        conv.append_many([f.action(f"r{i}", f"c{i}", args={"command": f"pytest -k case{i}"}),
                          f.observation(f"c{i}", f"frobnicate_widget failed {i}")])
    conv.step(LLMSummarizingCondenser(max_size=10, keep_first=2))
    store.create_conversation("d").append_many([f.system(), f.user("hello")])


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("vocabulary")
    with EventStore(folder / "agent.db") as store:
        fill(store)
    (folder / "events.jsonl").write_text(f.user("one more").model_dump_json(exclude_none=True) + "\n")
    (folder / "config.toml").write_text(CONFIG)
    return folder


def run_in_copy(template: Path, folder: Path, monkeypatch, args: list[str]):
    """``args`` in a fresh copy of the template, which is the working directory: paths are
    relative, so two runs in two copies print the same."""
    shutil.copytree(template, folder)
    monkeypatch.chdir(folder)
    return invoke(*args)


def said(old: str, new: str) -> str:
    return f"openhands-memory: {old} is deprecated; use {new}\n"


# (old spelling, new spelling, the one line the old one says)
RENAMED = {
    "condense -n": (["condense", "agent.db", "c", "--dry-run", "-c", "config.toml", "-n", "small", "--json"],
                    ["condense", "agent.db", "c", "--dry-run", "-c", "config.toml", "--name", "small", "--json"],
                    said("-n", "--name")),
    "replay --all": (["replay", "agent.db", "--all", "-t", "noop", "--json"],
                     ["replay", "agent.db", "--all-conversations", "-t", "noop", "--json"],
                     said("--all", "--all-conversations")),
    "replay --config FILE:NAME": (["replay", "agent.db", "c", "-c", "config.toml:small", "--json"],
                                  ["replay", "agent.db", "c", "-c", "config.toml", "--name", "small", "--json"],
                                  said("--config config.toml:small", "--config config.toml --name small")),
    "search --all": (["search", "agent.db", "c", "frobnicate_widget", "--all", "--json"],
                     ["search", "agent.db", "c", "frobnicate_widget", "--scope", "all", "--json"],
                     said("--all", "--scope all")),
    "search --visible": (["search", "agent.db", "c", "pytest", "--visible", "--json"],
                         ["search", "agent.db", "c", "pytest", "--scope", "visible", "--json"],
                         said("--visible", "--scope visible")),
    "import -c": (["import", "agent.db", "events.jsonl", "-c", "x", "--json"],
                  ["import", "agent.db", "events.jsonl", "--as", "x", "--json"], said("-c", "--as")),
    "import --conversation": (["import", "agent.db", "events.jsonl", "--conversation", "x", "--json"],
                              ["import", "agent.db", "events.jsonl", "--as", "x", "--json"],
                              said("--conversation", "--as")),
    "export -f": (["export", "agent.db", "c", "-f", "jsonl"], ["export", "agent.db", "c", "--file-format", "jsonl"],
                  said("-f", "--file-format")),
    "export --format jsonl": (["export", "agent.db", "c", "--format", "jsonl"],
                              ["export", "agent.db", "c", "--file-format", "jsonl"],
                              said("--format jsonl", "--file-format jsonl")),
    "export --format openhands": (["export", "agent.db", "c", "--format", "openhands", "-o", "out", "--json"],
                                  ["export", "agent.db", "c", "--file-format", "openhands", "-o", "out", "--json"],
                                  said("--format openhands", "--file-format openhands")),
    "view --head": (["view", "agent.db", "c", "--head", "5", "--json"], ["view", "agent.db", "c", "--at", "5", "--json"],
                    said("--head", "--at")),
    "--format table": (["conversations", "agent.db", "--format", "table"], ["conversations", "agent.db", "--format", "text"],
                       said("--format table", "--format text")),
}


@pytest.mark.parametrize("case", list(RENAMED))
def test_an_old_spelling_does_what_the_new_one_does_and_says_so_once(template, tmp_path, monkeypatch, case):
    old, new, line = RENAMED[case]
    now = run_in_copy(template, tmp_path / "new", monkeypatch, new)
    before = run_in_copy(template, tmp_path / "old", monkeypatch, old)
    assert now.exit_code == 0 and before.exit_code == 0, (now.output, before.output)
    assert now.stderr == "" and before.stderr == line
    assert before.stdout == now.stdout
    if "--json" in new:
        json.loads(before.stdout)  # the line went to stderr: stdout is the JSON alone


def test_every_old_option_is_run_here():
    spelled = {(argv[0], a.split(":")[0] if a.startswith("-") else a) for old, _, _ in RENAMED.values()
               for argv in [old] for a in argv[1:]}
    hidden = {(name, o) for name, command in commands().items() for option in options(command, hidden=True)
              for o in option.opts}
    assert hidden <= spelled


def test_an_old_spelling_is_said_once_however_often_it_is_given(template, tmp_path, monkeypatch):
    result = run_in_copy(template, tmp_path / "a", monkeypatch,
                         ["search", "agent.db", "c", "frobnicate_widget", "--all", "--all", "--format", "table"])
    assert result.exit_code == 0
    assert sorted(result.stderr.splitlines(keepends=True)) == [said("--all", "--scope all"),
                                                              said("--format table", "--format text")]


@pytest.mark.parametrize("args, says", [
    (["search", "agent.db", "c", "x", "--all", "--scope", "visible"], "give --scope or --all, not both"),
    (["search", "agent.db", "c", "x", "--all", "--visible"], "give --all or --visible, not both"),
    (["import", "agent.db", "events.jsonl", "-c", "a", "--as", "b"], "give --as or -c, not both"),
    (["export", "agent.db", "c", "--format", "openhands", "--file-format", "jsonl"],
     "give --file-format or --format, not both"),
    (["view", "agent.db", "c", "--head", "3", "--at", "4"], "give --at or --head, not both"),
    (["replay", "agent.db", "c", "--all", "--all-conversations"], "give conversations or --all-conversations"),
])
def test_an_old_and_a_new_spelling_that_disagree_are_a_usage_error(template, tmp_path, monkeypatch, args, says):
    before = (template / "agent.db").read_bytes()
    result = run_in_copy(template, tmp_path / "a", monkeypatch, args)
    assert result.exit_code == 2 and says in result.stderr, result.output
    assert (tmp_path / "a" / "agent.db").read_bytes() == before


def test_an_old_spelling_beside_the_new_one_with_the_same_value_is_taken(template, tmp_path, monkeypatch):
    result = run_in_copy(template, tmp_path / "a", monkeypatch,
                         ["search", "agent.db", "c", "frobnicate_widget", "--all", "--scope", "all", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["scope"] == "all"


# --- one syntax for choosing a strategy ----------------------------------------------------------


def test_condense_takes_settings_after_the_type_as_replay_does(template, tmp_path, monkeypatch):
    inline = run_in_copy(template, tmp_path / "a", monkeypatch,
                         ["condense", "agent.db", "c", "--dry-run", "--type", "recent,max_events=4", "--json"])
    apart = run_in_copy(template, tmp_path / "b", monkeypatch,
                        ["condense", "agent.db", "c", "--dry-run", "--type", "recent", "--set", "max_events=4", "--json"])
    one, two = json.loads(inline.stdout), json.loads(apart.stdout)
    assert one.pop("condenser") == "recent,max_events=4" and two.pop("condenser") == "recent"
    assert one == two and one["in_memory"]["sent_events"] == 4


def test_replay_takes_config_and_name_as_condense_does(template, tmp_path, monkeypatch):
    result = run_in_copy(template, tmp_path / "a", monkeypatch,
                         ["replay", "agent.db", "c", "-c", "config.toml", "--name", "small",
                          "--type", "recent,max_events=4", "--json"])
    assert result.exit_code == 0, result.output
    labels = [s["label"] for s in json.loads(result.stdout)["strategies"]]
    assert labels == ["recorded", "config:small", "recent,max_events=4"]


def test_replay_compares_several_sections_of_one_config(template, tmp_path, monkeypatch):
    result = run_in_copy(template, tmp_path / "a", monkeypatch,
                         ["replay", "agent.db", "c", "--config", "config.toml", "--name", "small", "--name", "small",
                          "--json"])
    assert result.exit_code == 0, result.output
    assert [s["label"] for s in json.loads(result.stdout)["strategies"]] == ["recorded", "config:small #1",
                                                                            "config:small #2"]


@pytest.mark.parametrize("args, says", [
    (["replay", "agent.db", "c", "--name", "small"], "--name picks [condenser.NAME] sections of one --config"),
    (["replay", "agent.db", "c", "-c", "config.toml", "-c", "other.toml", "--name", "small"],
     "--name picks [condenser.NAME] sections of one --config"),
    (["condense", "agent.db", "c", "--name", "small"], "--name picks a [condenser.NAME] section of --config"),
    (["replay", "agent.db", "c", "-t", "noop", "-t", "recent", "--set", "max_events=4"], "--set adjusts a single --type"),
])
def test_a_strategy_chosen_in_a_shape_that_does_not_fit_is_a_usage_error(template, tmp_path, monkeypatch, args, says):
    result = run_in_copy(template, tmp_path / "a", monkeypatch, args)
    assert result.exit_code == 2 and says in result.stderr, result.output


def test_every_example_in_every_help_parses_and_uses_no_old_spelling():
    import shlex

    group_ctx = click.Context(cli)
    for name, command in commands().items():
        text = command.get_help(click.Context(command, info_name=name, parent=group_ctx))
        examples = [shlex.split(line.split("|")[-1].strip()) for line in text.splitlines()
                    if line.strip().startswith("openhands-memory ") or "| openhands-memory " in line]
        examples = [args[2:] for args in examples if args[1] == name]
        assert examples, name
        old = {o for option in options(command, hidden=True) for o in option.opts}
        for args in examples:
            assert not old & set(args), (name, args)
            assert "table" not in args, (name, args)
            command.make_context(name, list(args), parent=group_ctx)  # a usage error raises
