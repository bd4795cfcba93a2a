"""The OpenHands SDK integration's tests (tests/sdk), each one a test of this run.

The SDK needs Python >= 3.12 and the suite's main run may be on 3.11, so tests/sdk runs with
the SDK environment's Python (tests/sdk_env.py). Its tests are collected there once a run
(tests/sdk_suite.py) and each becomes ``test_sdk[<its id under tests/sdk>]`` here. The first
of a chunk of files to run here runs the chunk's selected tests there in one process (under
xdist, two chunks, one on each worker: tests/conftest.py's scheduler hands them out first),
and each test then reports its own outcome from that run: its failure with its text, or its
skip, which fails while ``OHM_REQUIRE_SDK=1`` (CI). The runs borrow this session's PostgreSQL
server, so a PostgreSQL test there is one here, by name, for .ci/postgres_ran.py.

Without the SDK's environment there is one test, ``test_sdk[unavailable]``, which skips, or
fails with ``OHM_REQUIRE_SDK=1``; it fails with the output when tests/sdk cannot be collected
there. When this interpreter has the SDK, tests/sdk is collected directly and it skips.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from . import sdk_suite
from .sdk_env import REPO, sdk_python
from .sdk_suite import SDK_TESTS, sdk_env, sdk_file

MODULE = "tests/test_openhands_sdk.py"
CHUNK_TIMEOUT = 1200
UNAVAILABLE = "unavailable"

#: This session's collection of tests/sdk, made when this module's tests are generated.
COLLECTED = sdk_suite.Collected()


def required() -> bool:
    return os.environ.get("OHM_REQUIRE_SDK") == "1"


def short(nodeid: str) -> str:
    """A test's id here: its node id under tests/sdk, ``/`` for ``::`` (which would split this
    module's own node id)."""
    return nodeid.removeprefix(SDK_TESTS).replace("::", "/")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    global COLLECTED
    if "sdk_test" not in metafunc.fixturenames:
        return
    COLLECTED = sdk_suite.collected(sdk_suite.run_folder(metafunc.config))
    if COLLECTED.ids:
        metafunc.parametrize("sdk_test", COLLECTED.ids, ids=[short(i) for i in COLLECTED.ids])
    else:
        metafunc.parametrize("sdk_test", [None], ids=[UNAVAILABLE])


@dataclass
class ChunkRun:
    """One run of a chunk of SDK test files: each test's phases as tests/sdk_report.py wrote them."""

    phases: dict[str, list[dict]]
    exit_code: int | None  # None: stopped at the timeout
    output: str

    def failure(self, nodeid: str) -> str | None:
        """What went wrong for ``nodeid``, or None when it passed or skipped."""
        phases = self.phases.get(nodeid)
        if not phases:
            how = f"was stopped after {CHUNK_TIMEOUT} s" if self.exit_code is None else f"exited {self.exit_code}"
            return f"no outcome: the SDK run {how} before this test reported one:\n{self.output}"
        failed = [p for p in phases if p["outcome"] == "failed"]
        if failed:
            return "\n".join(f"({p['when']})\n{p['text']}" for p in failed)
        if self.exit_code != 0 and not any(p["outcome"] == "failed" for ps in self.phases.values() for p in ps):
            # Every test passed or skipped, and yet the run failed (a session fixture's
            # teardown, a plugin): no test explains it, so each says it.
            return f"the SDK run exited {self.exit_code} with no test failing:\n{self.output}"
        return None

    def skip_reason(self, nodeid: str) -> str | None:
        return next((p["text"] for p in self.phases.get(nodeid, ()) if p["outcome"] == "skipped"), None)


class ChunkRuns:
    """Runs each chunk of SDK test files once, when its first test here asks, with the tests
    of the chunk this session selected."""

    def __init__(self, request: pytest.FixtureRequest, tmp: Path) -> None:
        self.request = request
        self.tmp = tmp
        self.runs: dict[int, ChunkRun] = {}
        under_xdist = hasattr(request.config, "workerinput")
        self.chunk_of = sdk_suite.chunks([sdk_file(i) for i in COLLECTED.ids], sdk_suite.CHUNKS if under_xdist else 1)

    def of(self, nodeid: str) -> ChunkRun:
        chunk = self.chunk_of[sdk_file(nodeid)]
        if chunk not in self.runs:
            self.runs[chunk] = self._run(chunk)
        return self.runs[chunk]

    def _selected(self, chunk: int) -> list[str]:
        """The chunk's tests this session selected: its files when that is all of them."""
        chosen = {item.callspec.params["sdk_test"] for item in self.request.session.items
                  if item.nodeid.startswith(MODULE + "::test_sdk[")}
        files = [f for f, c in self.chunk_of.items() if c == chunk]
        every = [i for i in COLLECTED.ids if self.chunk_of[sdk_file(i)] == chunk]
        mine = [i for i in every if i in chosen]
        return files if mine == every else mine

    def _run(self, chunk: int) -> ChunkRun:
        python = sdk_python()
        assert python is not None
        report = self.tmp / f"chunk{chunk}.jsonl"
        extra = {"OHM_SDK_REPORT": str(report)}
        try:
            extra["OHM_TEST_POSTGRES_URL"] = self.request.getfixturevalue("postgres_server")
        except pytest.skip.Exception:
            pass  # no server here: the PostgreSQL half skips (or fails, with OHM_REQUIRE_POSTGRES=1)
        command = sdk_suite.pytest_cmd(python, "-p", "tests.sdk_report", *self._selected(chunk))
        try:
            done = subprocess.run(command, cwd=REPO, env=sdk_env(**extra), capture_output=True, text=True,
                                  timeout=CHUNK_TIMEOUT)
            exit_code: int | None = done.returncode
            output = done.stdout + done.stderr
        except subprocess.TimeoutExpired as e:
            exit_code = None
            output = "".join(s.decode(errors="replace") if isinstance(s, bytes) else s or "" for s in (e.stdout, e.stderr))
        phases: dict[str, list[dict]] = {}
        if report.exists():
            for line in report.read_text(encoding="utf-8").splitlines():
                phase = json.loads(line)
                phases.setdefault(phase["nodeid"], []).append(phase)
        return ChunkRun(phases, exit_code, output[-6000:])


@pytest.fixture(scope="session")
def sdk_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ChunkRuns:
    return ChunkRuns(request, tmp_path_factory.mktemp("sdk-runs"))


def test_sdk(sdk_test: str | None, sdk_runs: ChunkRuns) -> None:
    if sdk_test is None:
        problem = COLLECTED.problem
        if not problem:
            pytest.skip("this interpreter has the SDK: tests/sdk is collected in this session")
        if not COLLECTED.missing:
            pytest.fail(problem, pytrace=False)  # the environment is there and tests/sdk is broken in it
        if required():
            pytest.fail(problem + "\nOHM_REQUIRE_SDK=1 says tests/sdk must run", pytrace=False)
        pytest.skip(problem)
    run = sdk_runs.of(sdk_test)
    failure = run.failure(sdk_test)
    if failure is not None:
        said = next((line[1:].strip() for line in failure.splitlines() if line.startswith("E ")), "")
        pytest.fail(f"{said}\n{sdk_test} failed in the SDK environment:\n{failure}", pytrace=False)
    reason = run.skip_reason(sdk_test)
    if reason is not None:
        if required():
            pytest.fail(f"{sdk_test} skipped in the SDK environment ({reason}); OHM_REQUIRE_SDK=1 says it must run",
                        pytrace=False)
        pytest.skip(reason)
