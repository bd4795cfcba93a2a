"""The wheel is whole, and installed on its own it runs the README's first job.

The suite imports the library from the checkout, so a module the wheel leaves out passes every
other test and breaks ``openhands-memory`` as installed (``openhands_memory.conversation`` once
did). So a wheel is built here, as ``pip install .`` builds it, and must hold every module of
the source tree, the migrations (which live at the top of the repository and ship as
``openhands_memory/migrations``) and the data files; then it is installed into a folder of its
own and its command makes the demo database in a folder that is not the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "openhands_memory"
MIGRATIONS = REPO / "migrations"
# What a build reads. It builds from a copy: built in place, it would write build/ and an
# .egg-info into the checkout other runs are reading.
BUILD_FILES = ("pyproject.toml", "README.md")
BUILD_FOLDERS = ("openhands_memory", "migrations")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in BUILD_FILES:
        shutil.copy(REPO / name, source / name)
    for name in BUILD_FOLDERS:
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    # The build tools are the test environment's (the test extra names them): no index, no
    # network, and the same setuptools an isolated build would fetch.
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "-q", "-w", str(out), str(source)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (path,) = out.glob("*.whl")
    return path


def source_files() -> set[str]:
    """Where each file the wheel must hold goes in it."""
    def files(root: Path, *patterns: str) -> set[Path]:
        return {p for pattern in patterns for p in root.rglob(pattern) if "__pycache__" not in p.parts}

    wanted = {"openhands_memory/" + p.relative_to(PACKAGE).as_posix() for p in files(PACKAGE, "*.py")}
    wanted |= {"openhands_memory/migrations/" + p.relative_to(MIGRATIONS).as_posix()
               for p in files(MIGRATIONS, "*.py", "script.py.mako")}
    wanted |= {"openhands_memory/data/" + p.name for p in files(PACKAGE / "data", "*.jsonl", "*.toml")}
    return wanted


def test_the_wheel_holds_every_module_the_migrations_and_the_data(wheel):
    wanted = source_files()
    assert {"openhands_memory/migrations/env.py", "openhands_memory/migrations/script.py.mako",
            "openhands_memory/data/demo_conversation.jsonl"} <= wanted
    shipped = set(zipfile.ZipFile(wheel).namelist())
    assert sorted(wanted - shipped) == [], "files the wheel leaves out"


def test_the_wheel_installed_alone_runs_the_demo_outside_the_checkout(wheel, tmp_path):
    """Installed into a folder of its own, first on the path: what is imported is what the
    wheel holds, whatever else this environment has (the checkout, installed editable)."""
    site, work = tmp_path / "site", tmp_path / "work"
    work.mkdir()
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q",
                                "--target", str(site), str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-3000:]
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(site),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    where = subprocess.run([sys.executable, "-c", "import openhands_memory.migrations as m; print(m.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, timeout=60)
    assert where.stdout.strip() == str(site / "openhands_memory" / "migrations" / "__init__.py"), where.stderr
    demo = subprocess.run([sys.executable, "-m", "openhands_memory.cli", "demo"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert (work / "openhands-memory-demo.db").exists()
