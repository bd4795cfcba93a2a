"""``openhands-memory serve``: what it refuses before it listens (one line, exit 1), what it
says when it listens beyond loopback, and that it serves what create_app serves."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request

from openhands_memory.conversation import EventStore

from .. import factories as f
from ..cli_runner import run


def test_a_missing_file_is_refused_in_one_line(tmp_path):
    result = run("serve", tmp_path / "nope.db", code=1)
    assert result.output.count("\n") == 1 and "no such database file" in result.output
    assert not (tmp_path / "nope.db").exists()


def test_a_file_that_is_not_a_database_is_refused(tmp_path):
    other = tmp_path / "notes.db"
    other.write_text("hello " * 200)
    result = run("serve", other, code=1)
    assert result.output.count("\n") == 1 and result.output.startswith("Error:")


def test_a_port_in_use_is_refused_in_one_line(tmp_path):
    db = tmp_path / "a.db"
    EventStore(db).close()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = run("serve", db, "--port", port, code=1)
    assert result.output.count("\n") == 1 and f"cannot listen on 127.0.0.1:{port}" in result.output


def test_a_port_out_of_range_is_refused(tmp_path):
    db = tmp_path / "a.db"
    EventStore(db).close()
    assert "at most 65535" in run("serve", db, "--port", 70000, code=1).output


def test_listening_beyond_loopback_warns_and_serves(tmp_path):
    db = tmp_path / "a.db"
    with EventStore(db) as store:
        store.create_conversation("c").append_many([f.system(), f.user("hi")])
    proc = subprocess.Popen(
        [sys.executable, "-m", "openhands_memory.cli", "serve", str(db), "--host", "0.0.0.0", "--port", "0", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        warning = proc.stderr.readline()
        assert warning.startswith("Warning: listening on 0.0.0.0") and "no authentication" in warning
        url = json.loads(proc.stdout.readline())["url"]
        port = int(url.rsplit(":", 1)[1].strip("/"))
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/c/c.json", timeout=10) as response:
            assert json.loads(response.read())["events"] == 2
    finally:
        proc.terminate()
        proc.wait(timeout=10)
