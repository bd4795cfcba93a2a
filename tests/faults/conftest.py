"""Fault injection for the fault suite: real faults, never mocks.

* ``small_tmpfs(size)``: a tmpfs of ``size`` bytes mounted for the test (a full disk);
  ``small_ext4(size)``: the same on a loop-mounted ext4, where the kernel writes pages back;
* ``unprivileged(...)``: the argv prefix that runs a command as root without root's
  capabilities (``setpriv``), so that file and folder permissions apply to it;
* ``run_cli(...)``: the real command in a subprocess, its exit status and output.

These need root (CI runs as root on this machine kind). Elsewhere the tests that need them
skip, saying why, unless ``OHM_REQUIRE_FAULTS=1`` (set by ``.ci/run``): then they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, ContextManager, Iterator, Sequence

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Drops every capability for the command it prefixes: uid 0 stays, but without
#: CAP_DAC_OVERRIDE a read-only file or folder is read-only to it too.
UNPRIVILEGED = ("setpriv", "--bounding-set=-all", "--inh-caps=-all", "--")


def cannot_inject(reason: str) -> None:
    """Skip, or fail under OHM_REQUIRE_FAULTS=1 (CI): the fault suite must run there."""
    if os.environ.get("OHM_REQUIRE_FAULTS") == "1":
        pytest.fail(f"{reason}; OHM_REQUIRE_FAULTS=1 says the fault suite must run")
    pytest.skip(reason)


@contextmanager
def mounted_tmpfs(size: int) -> Iterator[Path]:
    """A fresh tmpfs of ``size`` bytes (rounded up to pages by the kernel), unmounted after."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        cannot_inject("mounting a small tmpfs needs root and mount(8)")
    where = Path(tempfile.mkdtemp(prefix="ohm-tmpfs-"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        where.rmdir()
        cannot_inject(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
        where.rmdir()


@contextmanager
def mounted_ext4(size: int) -> Iterator[Path]:
    """A fresh ext4 file system of ``size`` bytes on a loop device, unmounted after: a disk
    with the kernel's writeback, which a tmpfs does not have."""
    if os.geteuid() != 0 or shutil.which("mount") is None or shutil.which("mkfs.ext4") is None:
        cannot_inject("mounting a small ext4 needs root, mount(8) and mkfs.ext4(8)")
    image = Path(tempfile.mkdtemp(prefix="ohm-ext4-"))
    where = image / "mnt"
    where.mkdir()
    with open(image / "disk.img", "wb") as f:
        f.truncate(size)
    made = subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image / "disk.img")], capture_output=True, text=True)
    done = made if made.returncode else subprocess.run(
        ["mount", "-o", "loop", str(image / "disk.img"), str(where)], capture_output=True, text=True)
    if done.returncode != 0:
        shutil.rmtree(image)
        cannot_inject(f"cannot make and mount a small ext4: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False)
        shutil.rmtree(image, ignore_errors=True)


def _mounts(mounted: Callable[[int], ContextManager[Path]]) -> Iterator[Callable[[int], Path]]:
    """A test's ``mount(size)``, each mount undone when the test ends."""
    with ExitStack() as stack:
        yield lambda size: stack.enter_context(mounted(size))


@pytest.fixture
def small_ext4():
    """``small_ext4(size)`` mounts an ext4 of that many bytes for the rest of the test."""
    yield from _mounts(mounted_ext4)


@pytest.fixture
def small_tmpfs():
    """``small_tmpfs(size)`` mounts a tmpfs of that many bytes for the rest of the test."""
    yield from _mounts(mounted_tmpfs)


def unprivileged() -> tuple[str, ...]:
    """The argv prefix that drops root's capabilities (see UNPRIVILEGED)."""
    if shutil.which("setpriv") is None:
        cannot_inject("dropping root's capabilities needs setpriv(1) (util-linux)")
    if os.geteuid() != 0:
        return ()  # permissions apply to an ordinary user already
    return UNPRIVILEGED


@dataclass(frozen=True)
class CliRun:
    code: int
    stdout: str
    stderr: str

    def one_error_line(self) -> str:
        """The run failed with exit 1 and exactly one ``Error:`` line, no traceback."""
        assert self.code == 1, (self.code, self.stdout, self.stderr)
        assert "Traceback" not in self.stderr, self.stderr
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("Error: "), self.stderr
        return lines[0]

    def ok(self) -> "CliRun":
        assert self.code == 0, (self.code, self.stdout, self.stderr)
        assert "Traceback" not in self.stderr, self.stderr
        return self


def run_cli(*args: object, prefix: Sequence[str] = (), env: dict[str, str] | None = None,
            timeout: float = 120, cwd: Path | None = None) -> CliRun:
    """``openhands-memory ARGS`` in a subprocess (``prefix``: e.g. ``unprivileged()``)."""
    full_env = {**os.environ, "COLUMNS": "80", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "PYTHONPATH": str(REPO), **(env or {})}
    argv = [*prefix, sys.executable, "-m", "openhands_memory.cli", *map(str, args)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=full_env,
                          cwd=cwd or REPO)
    return CliRun(done.returncode, done.stdout, done.stderr)


def scratch_name(stem: str = "db") -> str:
    return f"{stem}-{uuid.uuid4().hex[:8]}.db"
