"""tests/sdk from the main run: collected and run in the SDK's environment (tests/sdk_env.py).

The SDK's tests are collected there once a run: the first of the run's processes (xdist's
workers) to reach tests/test_openhands_sdk.py starts the collection in the background
(``start_collecting``, from tests/conftest.py) while the rest of the suite is collected, and
the others wait for its answer instead of collecting again (each collection imports the SDK,
several seconds of CPU). They are then run in ``chunks``: the files dealt out in turn, one
process a chunk, each on its own worker (tests/conftest.py's scheduler).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TextIO

import pytest

from .sdk_env import REPO, sdk_here, sdk_missing, sdk_python

SDK_TESTS = "tests/sdk/"
COLLECT_TIMEOUT = 300
#: Chunks under xdist: the suite's two workers each run one.
CHUNKS = 2


def sdk_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_PROXY": "*", **extra}
    env.pop("PYTEST_ADDOPTS", None)  # the outer run's options (CI's JUnit report) are not for these runs
    return env


def pytest_cmd(python: Path, *args: str) -> list[str]:
    return [str(python), "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider", *args]


def sdk_file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def chunks(files: list[str], count: int) -> dict[str, int]:
    """Each SDK test file's chunk: the files in collection order, dealt out in turn."""
    order = list(dict.fromkeys(files))
    return {f: i % count for i, f in enumerate(order)}


@dataclass
class Collected:
    """tests/sdk's test ids in the SDK's environment, or why there are none (``problem``);
    neither when this interpreter has the SDK and collects tests/sdk itself."""

    ids: list[str] = field(default_factory=list)
    problem: str = ""
    missing: bool = False  # the problem is that there is no SDK environment here


_RUN_FOLDER = pytest.StashKey[str]()


def run_folder(config: pytest.Config) -> str:
    """The folder all the processes of one run share for the collection: under xdist, beside
    the workers' own temporary folders in the run's (which pytest removes with old runs, so
    a run killed midway leaves nothing for long); else one of this session's own."""
    basetemp = config.option.basetemp if hasattr(config, "workerinput") else None
    if basetemp:
        return str(Path(basetemp).parent / "sdk-collection")
    return config.stash.setdefault(_RUN_FOLDER, str(Path(tempfile.gettempdir()) / f"ohm-sdk-{uuid.uuid4().hex}"))


def _folder(run: str) -> Path:
    folder = Path(run)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# run folder -> (the collecting process, the lock this process holds until it has answered)
_collecting: dict[str, tuple[subprocess.Popen, TextIO]] = {}


def start_collecting(run: str) -> None:
    """Start collecting tests/sdk in the background, unless there is nothing to collect there
    or another process of this run already is (or did)."""
    if sdk_here() or run in _collecting:
        return
    python = sdk_python()
    if python is None:
        return
    folder = _folder(run)
    lock = open(folder / "lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return
    if (folder / "collected.json").exists():
        lock.close()
        return
    _collecting[run] = (_start(python, folder), lock)


def _start(python: Path, folder: Path) -> subprocess.Popen:
    with open(folder / "collect.out", "w") as out:  # a file, not a pipe nobody reads until the end
        return subprocess.Popen(pytest_cmd(python, "--collect-only", SDK_TESTS), cwd=REPO, env=sdk_env(),
                                stdout=out, stderr=subprocess.STDOUT, text=True)


def _finish(python: Path, process: subprocess.Popen, folder: Path) -> Collected:
    """Wait for the collecting process and write its answer for the run's other processes."""
    try:
        process.wait(timeout=COLLECT_TIMEOUT)
        found = _parse(python, process.returncode, (folder / "collect.out").read_text(errors="replace"))
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        found = Collected(problem=f"collecting tests/sdk in {python} took over {COLLECT_TIMEOUT} s")
    (folder / "collected.json").write_text(json.dumps(asdict(found)))
    return found


def collected(run: str) -> Collected:
    """tests/sdk's test ids: from this process's collection, or from the one another process of
    this run made (waiting for it), or collected now."""
    if sdk_here():
        return Collected()
    python = sdk_python()
    if python is None:
        return Collected(problem=sdk_missing("tests/sdk"), missing=True)
    start_collecting(run)
    folder = _folder(run)
    if run in _collecting:
        process, lock = _collecting.pop(run)
        try:
            return _finish(python, process, folder)
        finally:
            lock.close()  # lets the others read the answer
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # held by the process collecting until it has answered
        cache = folder / "collected.json"
        if cache.exists():
            return Collected(**json.loads(cache.read_text()))
        return _finish(python, _start(python, folder), folder)  # that process died first


def forget(run: str) -> None:
    """Remove this run's collection (each worker collects before any runs a test, so by the end
    of any session nobody needs it), stopping a collection nobody asked for in the end."""
    if run in _collecting:
        process, lock = _collecting.pop(run)
        process.kill()
        process.wait()
        lock.close()
    shutil.rmtree(run, ignore_errors=True)


def _parse(python: Path, code: int, output: str) -> Collected:
    ids = [line for line in output.splitlines() if line.startswith(SDK_TESTS) and "::" in line]
    if code != 0 or not ids:
        return Collected(problem=f"collecting tests/sdk in {python} failed (exit {code}):\n{output[-6000:]}")
    return Collected(ids=ids)
