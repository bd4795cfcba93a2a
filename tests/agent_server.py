"""The real OpenHands agent server (``openhands-agent-server`` 1.58, Python >= 3.12) and this
project's receiver (``openhands-memory serve DB --ingest``), each a subprocess on loopback.

The agent server lives in its own environment: ``$OHM_AGENT_SERVER_VENV``, else
``.venv-agent-server/`` at the repository's root, which ``.ci/run`` makes (it needs openai
>= 2.33, which the SDK environment's constraints hold back, so it cannot share ``.venv-sdk``).
Its model is the suite's loopback OpenAI-compatible server (tests/llm_server.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .sdk_env import REPO

SESSION_KEY = "agent-server-session-key"


def venv() -> Path:
    return Path(os.environ.get("OHM_AGENT_SERVER_VENV") or REPO / ".venv-agent-server")


def python() -> Path | None:
    found = venv() / "bin" / "python"
    return found if found.exists() else None


def missing() -> str:
    return (f"no OpenHands agent server environment at {venv()}: create it with `python3.12 -m venv "
            ".venv-agent-server && .venv-agent-server/bin/pip install -r tests/agent_server_requirements.txt` "
            "(or point OHM_AGENT_SERVER_VENV at one)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(url: str, method: str = "GET", data: Any = None, key: str | None = SESSION_KEY,
            timeout: float = 30) -> Any:
    body = None if data is None else json.dumps(data).encode()
    headers = {"Content-Type": "application/json", **({"X-Session-API-Key": key} if key else {})}
    with urllib.request.urlopen(urllib.request.Request(url, data=body, method=method, headers=headers),
                                timeout=timeout) as answer:
        text = answer.read()
    return json.loads(text) if text else None


def wait_until(check: Any, what: str, timeout: float = 60, every: float = 0.2) -> Any:
    end = time.monotonic() + timeout
    while True:
        try:
            found = check()
        except (OSError, urllib.error.URLError):
            found = None
        if found:
            return found
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


@dataclass
class Receiver:
    """``openhands-memory serve DB --ingest`` on ``port``; ``kill()`` is kill -9."""

    database: str
    port: int
    log: Path
    keys: tuple[str, ...] = ()
    options: tuple[str, ...] = ()  # more of serve's options (--backfill URL ...)
    process: subprocess.Popen | None = None

    def start(self) -> "Receiver":
        args = [sys.executable, "-m", "openhands_memory.cli", "serve", self.database, "--ingest",
                "--port", str(self.port), *self.options]
        for key in self.keys:
            args += ["--api-key", key]
        env = {k: v for k, v in os.environ.items() if k != "OPENHANDS_MEMORY_INGEST_KEYS"}
        self.process = subprocess.Popen(args, stdout=self.log.open("ab"), stderr=subprocess.STDOUT, env=env,
                                        cwd=REPO)
        wait_until(self._listening, f"the receiver on port {self.port} (log: {self.log})", timeout=30)
        return self

    def _listening(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(f"the receiver exited with {self.process.returncode}: {self.log.read_text()}")
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class AgentServer:
    """The agent server on a free loopback port, its webhook pointed at ``webhook_url``."""

    folder: Path
    webhook_url: str
    settings: dict[str, str] = field(default_factory=dict)
    port: int = 0
    process: subprocess.Popen | None = None
    # Where its terminal tool's tmux servers put their sockets: a tmux server outlives the
    # agent server that started it, so stop() ends each one it finds here.
    tmux_dir: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "AgentServer":
        found = python()
        assert found is not None, missing()
        self.port = free_port()
        self.folder.mkdir(parents=True, exist_ok=True)
        # Short (a socket's path has a length limit) and ours alone.
        self.tmux_dir = Path(tempfile.mkdtemp(prefix="ohm-tmux-", dir="/tmp"))
        env = {
            **os.environ,
            "TMUX_TMPDIR": str(self.tmux_dir),
            "OH_SESSION_API_KEYS_0": SESSION_KEY,
            "OH_WEBHOOKS_0_BASE_URL": self.webhook_url,
            # The sender's buffer flushed soon, and retried for as long as a test's receiver is down.
            "OH_WEBHOOKS_0_FLUSH_DELAY": "0.2",
            "OH_WEBHOOKS_0_NUM_RETRIES": "30",
            "OH_WEBHOOKS_0_RETRY_DELAY": "1",
            "OPENHANDS_SUPPRESS_BANNER": "1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            **self.settings,
        }
        log = (self.folder / "agent-server.log").open("ab")
        self.process = subprocess.Popen(
            [str(found), "-m", "openhands.agent_server", "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=self.folder, env=env, stdout=log, stderr=subprocess.STDOUT)
        wait_until(self._alive, f"the agent server to start (log: {self.folder / 'agent-server.log'})", timeout=120)
        return self

    def _alive(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(f"the agent server exited: {(self.folder / 'agent-server.log').read_text()[-3000:]}")
        request(f"{self.url}/alive", timeout=2)
        return True

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self.tmux_dir is not None:
            for sock in self.tmux_dir.glob("tmux-*/*"):
                subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True, timeout=10)
            shutil.rmtree(self.tmux_dir, ignore_errors=True)

    def start_conversation(self, llm_url: str, workspace: Path, task: str, *, condense_at: int | None = None) -> str:
        """A conversation whose agent runs the terminal tool, started on ``task``; its id."""
        workspace.mkdir(parents=True, exist_ok=True)
        llm = {"model": "openai/test-model", "base_url": llm_url, "api_key": "test-key", "usage_id": "agent",
               "num_retries": 0}
        agent: dict[str, Any] = {"kind": "Agent", "llm": llm, "tools": [{"name": "terminal"}]}
        if condense_at is not None:
            agent["condenser"] = {"kind": "LLMSummarizingCondenser", "llm": {**llm, "usage_id": "condenser"},
                                  "max_size": condense_at, "keep_first": 2}
        made = request(f"{self.url}/api/conversations", "POST", {
            "agent": agent,
            "workspace": {"working_dir": str(workspace)},
            "initial_message": {"role": "user", "content": [{"type": "text", "text": task}], "run": True},
        })
        return made["id"]

    def status(self, cid: str) -> str:
        return request(f"{self.url}/api/conversations/{cid}")["execution_status"]

    def wait_finished(self, cid: str, timeout: float = 120) -> str:
        return wait_until(lambda: (s := self.status(cid)) in ("finished", "error", "stuck") and s,
                          f"conversation {cid} to finish", timeout=timeout)

    def events(self, cid: str) -> list[dict[str, Any]]:
        """Every event its REST API lists, oldest first (``/events/search``, page by page)."""
        out: list[dict[str, Any]] = []
        page: str | None = None
        while True:
            query = "limit=100&sort_order=TIMESTAMP" + (f"&page_id={page}" if page else "")
            found = request(f"{self.url}/api/conversations/{cid}/events/search?{query}")
            out += found["items"]
            page = found.get("next_page_id")
            if not page:
                return out

    def state(self, cid: str) -> dict[str, Any]:
        return request(f"{self.url}/api/conversations/{cid}")

    def delete(self, cid: str) -> None:
        request(f"{self.url}/api/conversations/{cid}", "DELETE")


# The view the agent server's own SDK makes of a conversation's events (``View.from_events``:
# condensations applied in order, then its properties enforced), as (kind, id) pairs, the
# summary as ("summary", its text).
_SDK_VIEW = """
import json, sys
from openhands.sdk.context.view import View
from openhands.sdk.event import CondensationSummaryEvent, Event
import openhands.tools.terminal  # (its tool's kind, named in the system prompt event)
view = View.from_events([Event.model_validate(e) for e in json.load(sys.stdin)])
print(json.dumps([["summary", e.summary] if isinstance(e, CondensationSummaryEvent) else [e.kind, e.id]
                  for e in view.events]))
"""


def sdk_view(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """What the agent server's SDK would send of ``events`` (its REST API's listing)."""
    found = python()
    assert found is not None, missing()
    run = subprocess.run([str(found), "-c", _SDK_VIEW], input=json.dumps(events), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    return [tuple(x) for x in json.loads(run.stdout)]


def events_folder(server: "AgentServer", cid: str) -> Path:
    """Where the agent server persisted a conversation's event files (its
    ``conversations_path``, ``workspace/conversations`` under its folder)."""
    import uuid

    found = [p for p in (server.folder / "workspace" / "conversations").rglob("events")
             if uuid.UUID(cid).hex in str(p) or cid in str(p)]
    assert len(found) == 1, sorted(str(p) for p in server.folder.rglob("*") if p.is_dir())[:40]
    return found[0]


def pages(items: list[Any], size: int) -> Iterator[list[Any]]:
    for k in range(0, len(items), size):
        yield items[k : k + size]
