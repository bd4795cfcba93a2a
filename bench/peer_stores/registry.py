"""The stores bench/peers.py compares, the pinned environments the peers run in, and the
neutral workload files the peers' children read.

Each peer runs in a virtual environment the bench makes on first use under
``<dir>/venv-<name>`` with the versions pinned here (current on PyPI on 2026-11-24; the
mirror this was written on had no langchain-protocol new enough for langchain-core 1.8.4,
hence 1.8.3). An environment whose ``pins.txt`` differs from these is made again. The
project's own rows run with the interpreter that runs the bench.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Iterator

HERE = Path(__file__).resolve().parent

PINS: dict[str, list[str]] = {
    "openai": ["openai-agents==0.24.0", "sqlalchemy[asyncio]==2.1.9", "aiosqlite==0.22.1"],
    "langgraph": ["langgraph==1.2.24", "langgraph-checkpoint-sqlite==3.1.2", "langchain-core==1.8.3"],
    "adk": ["google-adk[db]==2.13.0", "sqlalchemy[asyncio]==2.1.9", "aiosqlite==0.22.1"],
}


@dataclass(frozen=True)
class Store:
    name: str
    label: str  # the tables' first column
    script: str  # under bench/peer_stores
    env: str | None  # a key of PINS; None: this project, with the bench's interpreter
    condenser: bool = False  # this project's rows: the history has Condensations
    events: bool = True  # this project's rows: the history is bench/common.py's event database
    #                      (False: built by the store's own child from the items, as a peer's)
    window: bool = False  # a session whose get_items takes a limit: its "window" op is measured

    @property
    def ours(self) -> bool:
        return self.env is None


STORES = [
    Store("ohm-condenser", "this project, condenser", "this_project.py", None, condenser=True),
    Store("ohm-no-condenser", "this project, no condenser", "this_project.py", None),
    Store("ohm-session-condenser", "MemorySession, condenser", "memory_session.py", None, condenser=True,
          events=False, window=True),
    Store("ohm-session", "MemorySession, no condenser", "memory_session.py", None, events=False, window=True),
    Store("openai-sqlite", "OpenAI SQLiteSession", "openai_agents.py", "openai", window=True),
    Store("openai-sqlalchemy", "OpenAI SQLAlchemySession", "openai_agents.py", "openai", window=True),
    Store("langgraph", "LangGraph SqliteSaver", "langgraph_saver.py", "langgraph"),
    Store("adk", "ADK DatabaseSessionService", "google_adk.py", "adk"),
]
BASELINE = "ohm-no-condenser"  # what the peers' ratios divide by: every item sent, like theirs


# --- environments --------------------------------------------------------------------------


def python_of(store: Store, folder: Path) -> str:
    return sys.executable if store.env is None else str(folder / f"venv-{store.env}" / "bin" / "python")


def ensure_env(name: str, folder: Path) -> Path:
    """``<folder>/venv-<name>`` with PINS[name] installed (made or remade when they differ)."""
    path = folder / f"venv-{name}"
    pins = "\n".join(PINS[name]) + "\n"
    marker = path / "pins.txt"
    if marker.exists() and marker.read_text() == pins:
        return path
    print(f"  making {path} ({', '.join(PINS[name])})...", flush=True)
    venv.EnvBuilder(clear=True, with_pip=True).create(path)
    subprocess.run([str(path / "bin" / "python"), "-m", "pip", "install", "-q", *PINS[name]], check=True)
    marker.write_text(pins)
    return path


def versions(name: str, folder: Path) -> dict[str, str]:
    """The installed versions of the pinned packages of environment ``name``."""
    code = ("import importlib.metadata as m, json, sys; "
            "print(json.dumps({p: m.version(p) for p in sys.argv[1:]}))")
    names = [p.split("==")[0].split("[")[0] for p in PINS[name]]
    out = subprocess.run([str(folder / f"venv-{name}" / "bin" / "python"), "-c", code, *names],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


# --- the neutral workload ------------------------------------------------------------------


def neutral(event: Any) -> dict[str, Any] | None:
    """An SDK-workload event as the record the peers' children read (child.py), or None for
    what a peer keeps outside its session (the system prompt) and Condensations."""
    kind = type(event).__name__
    if kind == "MessageEvent":
        role = event.llm_message.role
        text = "".join(c.text for c in event.llm_message.content)
        return {"k": "user" if role == "user" else "agent", "text": text}
    if kind == "ActionEvent":
        return {"k": "call", "turn": event.llm_response_id, "id": event.tool_call_id, "name": event.tool_name,
                "arguments": event.tool_call.arguments, "thought": "".join(t.text for t in event.thought)}
    if kind == "ObservationEvent":
        obs = event.observation
        text = "".join(c.get("text", "") for c in obs.get("content", []))
        return {"k": "result", "id": event.tool_call_id, "name": event.tool_name,
                "output": text + obs.get("metadata", {}).get("suffix", "")}
    return None


def _write_lines(path: Path, lines: Iterator[Any]) -> Path:
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        with open(partial, "w") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
        partial.replace(path)
    return path


def items_file(folder: Path, n: int, seed: int) -> Path:
    """The peers' history: the SDK workload's ``n`` events without a condenser, as records."""
    from bench.sdk_workload import sdk_events

    recs = (r for r in map(neutral, sdk_events(n, seed=seed, condense=False)) if r is not None)
    return _write_lines(folder / "workload" / f"items-{n}-s{seed}.jsonl", recs)


def steps_file(folder: Path, seed: int, count: int) -> Path:
    """The steps appended in the append measurement: ``step_pairs(seed)``, [call, result] each."""
    from bench.sdk_workload import step_pairs

    pairs = ([neutral(a), neutral(o)] for a, o in islice(step_pairs(seed), count))
    return _write_lines(folder / "workload" / f"steps-{count}-s{seed}.jsonl", pairs)
