"""The throwaway PostgreSQL server (tools/pg_server.py) never outlives the process that
started it: Ctrl-C, or a SIGTERM (a CI timeout, ``kill``), still stops it and deletes its
folder. The server is a daemon of its own, so without that a killed test session would leave
it running, holding a port and a temporary folder, for as long as the machine runs."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def _require_server_binaries() -> None:
    if shutil.which("pg_config") is None:
        reason = "PostgreSQL: no server binaries (pg_config)"
        if os.environ.get("OHM_REQUIRE_POSTGRES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


def _listening(url: str) -> bool:
    parts = urlsplit(url)
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((parts.hostname, parts.port)) == 0


def _server_folder(url: str) -> Path:
    import psycopg

    with psycopg.connect(url) as conn:  # the server's socket folder is its temporary folder
        return Path(conn.execute("SHOW unix_socket_directories").fetchone()[0])


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("OHM_TEST_POSTGRES_URL", None)  # the child must start a server of its own
    env.pop("PYTEST_ADDOPTS", None)  # e.g. .ci/run's --junitxml: the outer session's file
    return env


def _until_line(child: subprocess.Popen, marker: str) -> tuple[str, str]:
    """Read the child's output up to the line holding ``marker``; (that line, all read)."""
    seen = []
    for line in child.stdout:  # type: ignore[union-attr]
        seen.append(line)
        if marker in line:
            return line, "".join(seen)
    raise AssertionError(f"{marker!r} never printed:\n{''.join(seen)}")


@pytest.mark.parametrize("how", ["ctrl_c", "sigterm"])
def test_postgres_test_server_stops_when_the_session_is_interrupted(tmp_path, how):
    _require_server_binaries()
    (tmp_path / "conftest.py").write_text("from tests.backends import postgres_server  # noqa: F401\n")
    (tmp_path / "test_interrupted.py").write_text(
        "import time\n"
        "def test_interrupted(postgres_server):\n"
        "    print('SERVER', postgres_server, flush=True)\n"
        f"    {'raise KeyboardInterrupt' if how == 'ctrl_c' else 'time.sleep(120)'}\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-s", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
         str(tmp_path / "test_interrupted.py")],
        cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        line, seen = _until_line(child, "SERVER ")
        url = line.split("SERVER ", 1)[1].strip()
        folder = _server_folder(url) if how == "sigterm" else None
        if how == "sigterm":
            child.send_signal(signal.SIGTERM)
        rest, _ = child.communicate(timeout=90)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 2, seen + rest  # pytest's "interrupted", after its teardown
    assert not _listening(url)
    if folder is not None:
        assert not folder.exists()


def test_postgres_server_tool_stops_on_sigterm():
    _require_server_binaries()
    child = subprocess.Popen([sys.executable, "tools/pg_server.py"], cwd=REPO, env=_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line, _ = _until_line(child, "postgresql://")
        url = line.strip()
        folder = _server_folder(url)
        assert _listening(url) and folder.exists()
        started = time.monotonic()
        child.send_signal(signal.SIGTERM)
        child.communicate(timeout=90)
    finally:
        if child.poll() is None:
            child.kill()
    assert time.monotonic() - started < 60
    assert not _listening(url)
    assert not folder.exists()
