"""An OpenHands SDK conversation stored by DatabaseFileStore, against the SDK's own folder.

    .venv-sdk/bin/python bench/openhands_sdk.py [--sizes 1k,10k] [--repeats 5] [--postgres]

Runs in the SDK's environment (Python >= 3.12, ``pip install ".[openhands,postgres]"``).
For each history size it builds one conversation per store with the SDK's own code
(``ConversationState.create``, then ``state.events.append``), events made with the SDK's
classes in the shape an agent writes them (think calls, 10 % batches of three, a browser
page every fifth step; observations of 0.3-2 KB). Stores: ``LocalFileStore`` (a folder, one
file per event: the SDK's default), ``DatabaseFileStore`` on an SQLite file, and with
``--postgres`` on a throwaway PostgreSQL server (tools/pg_server.py, on 127.0.0.1).

Figures (medians of ``--repeats`` runs; wall and CPU time of this process):
  * step: what an agent step asks of the store: append an action and its observation
    through the SDK's EventLog, save base_state.json once (the SDK autosaves the state as
    the step changes it), 20 steps per run, per step;
  * resume: ``ConversationState.create`` of the stored conversation by a new store object
    (what a new process pays: base_state.json, the log's index, the view rebuilt from
    every event), after a garbage collection, with the other stores' objects gone (a
    bigger heap makes the SDK's parsing of 10k events slower for whoever comes last);
  * disk: the folder's files (allocated blocks) against the SQLite file.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import logging

from openhands.sdk import LLM, Agent
from openhands.sdk.conversation.state import ConversationState
from openhands.sdk.event import (
    ActionEvent,
    Event,
    MessageEvent,
    ObservationEvent,
    SystemPromptEvent,
)
from openhands.sdk.io import LocalFileStore
from openhands.sdk.llm import Message, MessageToolCall, TextContent
from openhands.sdk.tool.builtins.think import ThinkAction, ThinkObservation
from openhands.sdk.workspace import LocalWorkspace
from openhands.tools.browser_use.definition import (
    BrowserNavigateAction,
    BrowserObservation,
)
from pydantic import SecretStr

from bench.common import load, machine, parse_size, say
from bench.report import table
from openhands_memory.integrations.openhands_sdk import DatabaseFileStore

STEPS_PER_RUN = 20


def events(start: int, n_steps: int) -> Iterator[list]:
    """The events of steps ``start`` .. ``start + n_steps - 1``."""
    for step in range(start, start + n_steps):
        rid = f"resp-{step}"
        if step % 5 == 4:
            batch = [("browser_navigate", BrowserNavigateAction(url=f"https://docs.example/{step}"),
                      BrowserObservation.from_text(f"page {step}: " + "lorem ipsum " * 160))]
        else:
            width = 3 if step % 10 == 0 else 1
            batch = [("think", ThinkAction(thought=f"step {step}.{k}: " + "consider the failing test " * (step % 12)),
                      ThinkObservation.from_text("Your thought has been logged. " + "ok " * (step % 90)))
                     for k in range(width)]
        actions, observations = [], []
        for k, (name, action, observation) in enumerate(batch):
            call = f"call-{step}-{k}"
            act = ActionEvent(thought=[TextContent(text=f"step {step}")] if k == 0 else [], action=action,
                              tool_name=name, tool_call_id=call, llm_response_id=rid,
                              tool_call=MessageToolCall(id=call, name=name, arguments=action.model_dump_json(),
                                                        origin="completion"))
            actions.append(act)
            observations.append(ObservationEvent(observation=observation, action_id=act.id, tool_name=name,
                                                 tool_call_id=call))
        yield actions + observations


def agent() -> Agent:
    return Agent(llm=LLM(model="openai/bench", api_key=SecretStr("k"), usage_id="agent"), tools=[])


def open_state(store, cid: uuid.UUID, workspace: Path) -> ConversationState:
    return ConversationState.create(id=cid, agent=agent(), workspace=LocalWorkspace(working_dir=str(workspace)),
                                    file_store=store, max_iterations=10_000)


def build(store, cid: uuid.UUID, workspace: Path, n_events: int) -> int:
    """A conversation of about ``n_events`` events; returns the step number to go on from."""
    state = open_state(store, cid, workspace)
    with state:
        state.events.append(SystemPromptEvent(system_prompt=TextContent(text="You are a careful agent."), tools=[]))
        state.events.append(MessageEvent(source="user", llm_message=Message(
            role="user", content=[TextContent(text="Fix the failing test.")])))
    step = 0
    while len(state.events) < n_events:
        for batch in events(step, 50):
            for e in batch:
                state.events.append(e)
        step += 50
    return step


def step_run(state: ConversationState, start: int) -> tuple[float, float]:
    """Wall and CPU seconds per step for STEPS_PER_RUN steps."""
    batches = list(events(start, STEPS_PER_RUN))
    wall, cpu = time.perf_counter(), time.process_time()
    for batch in batches:
        for e in batch:
            state.events.append(e)
        state._save_base_state(state._fs)
    return (time.perf_counter() - wall) / STEPS_PER_RUN, (time.process_time() - cpu) / STEPS_PER_RUN


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    gc.collect()  # each run starts from the same heap: no collection owed by an earlier one
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def resume_run(make: Callable[[int, uuid.UUID], object], n: int, cid: uuid.UUID, workspace: Path) -> tuple[float, float]:
    """A new store object (as a new process has) and the SDK's resume through it."""
    store = make(n, cid)
    figures = timed(lambda: open_state(store, cid, workspace))
    if isinstance(store, DatabaseFileStore):
        store.close()
    return figures


def allocated(path: Path) -> int:
    if path.is_file():
        return path.stat().st_blocks * 512
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1k,10k", help="history sizes (events), e.g. 1k,10k")
    ap.add_argument("--repeats", type=int, default=5, help="runs per figure (the median is printed)")
    ap.add_argument("--postgres", action="store_true", help="also on a throwaway PostgreSQL server")
    ap.add_argument("--dir", type=Path, default=None, help="working folder (default: a temporary one)")
    args = ap.parse_args()
    logging.disable(logging.INFO)
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="ohm-sdk-bench-", dir=args.dir))
    say(f"machine: {machine()}")
    say(f"load before: {load()}")
    server = None
    if args.postgres:
        from tools.pg_server import throwaway_server

        server = throwaway_server()
        pg_url = server.__enter__()
    try:
        stores: dict[str, Callable[[int, uuid.UUID], object]] = {
            "folder (LocalFileStore)": lambda n, cid: LocalFileStore(str(work / f"folder-{n}" / cid.hex)),
            "SQLite (DatabaseFileStore)": lambda n, cid: DatabaseFileStore(work / f"sdk-{n}.db", cid),
        }
        if server is not None:
            import psycopg

            def pg_store(n: int, cid: uuid.UUID) -> DatabaseFileStore:
                url = pg_url.rsplit("/", 1)[0] + f"/sdk_{n}"
                with psycopg.connect(pg_url, autocommit=True) as admin:
                    if admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (f"sdk_{n}",)).fetchone() is None:
                        admin.execute(f"CREATE DATABASE sdk_{n}")
                return DatabaseFileStore(url, cid)

            stores["PostgreSQL (DatabaseFileStore)"] = pg_store
        rows, parses = [], []
        for n in sizes:
            for name, make in stores.items():
                cid = uuid.uuid4()
                ws = work / "ws"
                store = make(n, cid)
                next_step = build(store, cid, ws, n)
                state = open_state(make(n, cid), cid, ws)
                steps = []
                for r in range(args.repeats):
                    steps.append(step_run(state, next_step))
                    next_step += STEPS_PER_RUN
                resumes = [resume_run(make, n, cid, ws) for _ in range(args.repeats)]
                disk = ""
                if name.startswith("folder"):
                    disk = f"{allocated(work / f'folder-{n}' / cid.hex) / len(state.events):,.0f} B/event"
                elif name.startswith("SQLite"):
                    for s in (store, state._fs):
                        s.close()
                    path = work / f"sdk-{n}.db"
                    disk = f"{allocated(path) / len(state.events):,.0f} B/event"
                rows.append([
                    f"{n:,}", name,
                    f"{statistics.median(w for w, _ in steps) * 1e3:.2f} / {statistics.median(c for _, c in steps) * 1e3:.2f}",
                    f"{statistics.median(w for w, _ in resumes) * 1e3:.0f} / {statistics.median(c for _, c in resumes) * 1e3:.0f}",
                    disk,
                ])
                say(f"  {n:,} events, {name}: done (load {load()})")
                texts = [e.model_dump_json(exclude_none=True) for e in state.events]
                del state, store  # the next store is measured without this one's heap
            # The part of a resume no store can save: the SDK parsing every event's JSON.
            parse = [timed(lambda ts=texts: [Event.model_validate_json(t) for t in ts]) for _ in range(args.repeats)]
            parses.append(f"{n:,} events: {statistics.median(w for w, _ in parse) * 1e3:.0f} ms")
        print()
        print(table(["events", "store", "step ms wall/CPU", "resume ms wall/CPU", "disk"], rows))
        print(f"\nmedians of {args.repeats} runs; a step appends an action and its observation and saves "
              f"base_state.json ({STEPS_PER_RUN} steps a run)")
        say("of a resume, the SDK's own parsing of the events' JSON (Event.model_validate_json) "
            f"takes {'; '.join(parses)}")
        say(f"load after: {load()}")
    finally:
        if server is not None:
            server.__exit__(None, None, None)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
