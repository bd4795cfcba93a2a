"""The README is a front door that stays true: short, its two commands the ones CI runs, its
command-line examples runnable as shown, and every link of the README, CONTRIBUTING.md and
docs/ leading to a file and heading that exist.

(The README's library example is run by tests/test_cli_text.py.)"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from .cli_runner import invoke

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = [README, REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]


def fenced_block(text: str, heading: str) -> list[str]:
    """The lines of the first fenced code block under ``heading``."""
    section = text.split(f"\n{heading}\n", 1)[1]
    block = re.search(r"^```[a-z]*\n(.*?)^```", section, re.S | re.M)
    assert block, f"no code block under {heading!r}"
    return block.group(1).splitlines()


def slug(heading: str) -> str:
    """A heading's anchor, as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for line in without_fences(path.read_text()).splitlines():
        if m := re.match(r"#{1,6} (.+)", line):
            base = slug(m.group(1))
            name, n = base, 0
            while name in found:  # a repeated heading gets -1, -2, ...
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


def without_fences(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def without_code(text: str) -> str:
    """The text outside fenced blocks and inline code: a link there is not a link."""
    return re.sub(r"`[^`\n]*`", "", without_fences(text))


def test_the_readme_fits_in_300_lines():
    assert len(README.read_text().splitlines()) <= 300


def test_the_two_commands_are_the_ones_ci_runs():
    lines = fenced_block(README.read_text(), "## Two commands on a fresh machine")
    assert lines == [
        'python -m pip install . && openhands-memory demo                 # set up, run the main job',
        'python -m pip install ".[test]" && python -m pytest              # pass the tests',
    ]
    test_command = lines[1].split("#")[0].strip()
    assert test_command in (REPO / ".ci" / "run").read_text().splitlines()


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_link_leads_to_a_file_and_heading_that_exist(doc: Path):
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", without_code(doc.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto: — not ours to check
            continue
        path, _, anchor = target.partition("#")
        where = (doc.parent / path).resolve() if path else doc
        if not where.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (where.suffix != ".md" or anchor not in anchors(where)):
            broken.append(f"{target}: no heading #{anchor}")
    assert broken == []


def test_the_command_line_examples_run_as_shown(tmp_path, monkeypatch):
    """Each line of the README's command-line block, in order, in an empty folder: the first
    builds the demo database the others use."""
    monkeypatch.chdir(tmp_path)
    lines = fenced_block(README.read_text(), "## The command line at a glance")
    assert len(lines) >= 20
    for line in lines:
        args = shlex.split(line, comments=True)
        assert args[0] == "openhands-memory", line
        result = invoke(*args[1:])
        assert result.exit_code == 0, f"{line}\n{result.output}"
        assert not re.search(r"^Error:", result.output, re.M), f"{line}\n{result.output}"
