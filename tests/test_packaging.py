"""The installed package is whole: every subpackage ships, and the installed command runs the
README's first job from a folder that is not the checkout.

(The suite imports the library from the checkout, so a subpackage missing from
``pyproject.toml``'s list passes every other test and breaks ``openhands-memory`` as
installed: ``openhands_memory.conversation`` once did.)"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_every_subpackage_is_in_the_wheels_list():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(REPO).parts)
        for p in (REPO / "openhands_memory").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert found - listed == set(), f"subpackages the wheel would leave out: {sorted(found - listed)}"


def test_the_installed_command_runs_the_demo_outside_the_checkout(tmp_path):
    """Run from a temporary folder with no path to the checkout: what is imported is what
    was installed (in CI, a plain ``pip install``)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-m", "openhands_memory.cli", "demo"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "openhands-memory-demo.db").exists()
