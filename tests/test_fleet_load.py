"""A fleet through PgBouncer, as fleets run it: agent processes (tests/fleet_agent.py), some
sharing a conversation, each appending call/result steps with condensations, pins and
planted tokens, through a PgBouncer in transaction mode with 10 server connections (Debian's
defaults otherwise: no ignore_startup_parameters, no prepared-statement support).

Afterwards: every conversation's ids gap-free, every acknowledged step stored once and
nothing stored that was not sent, every condensation's forgotten range valid, ``doctor
--full`` healthy, search finds every planted token. Under load, the faults a fleet meets:
the pooler restarted, server backends terminated. Each failed command is one line; nothing
acknowledged is lost; the agents go on.

Bounded: a few dozen processes of short loops (this machine kind has 2 cores, shared)."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from openhands_memory.conversation import EventStore
from openhands_memory.events import ActionEvent, Condensation, ObservationEvent

from . import fleet_agent
from .backends import pooled
from .cli_runner import run
from .fleet_agent import call_id, planted
from .test_shared_steps import forgotten_stays_forgotten

#: Agents and their conversations: four groups of four share one each, the rest are alone.
AGENTS, STEPS, SHARING, GROUP = 50, 100, 20, 4
FAULT_AGENTS, FAULT_STEPS = 16, 60


def plan(agents: int, sharing: int) -> dict[str, list[int]]:
    """conversation -> its agents."""
    groups: dict[str, list[int]] = {}
    for agent in range(agents):
        cid = f"shared{agent // GROUP}" if agent < sharing else f"alone{agent}"
        groups.setdefault(cid, []).append(agent)
    return groups


@pytest.fixture
def fleet(postgres_server, postgres_database_factory) -> Iterator[tuple[str, str, Any]]:
    """(the database's URL through a PgBouncer with 10 server connections, its own URL,
    the pooler)."""
    direct = postgres_database_factory()
    with pooled(postgres_server, pool_size=10) as running:
        yield running.url(direct.rsplit("/", 1)[1]), direct, running


@dataclass
class Fleet:
    processes: list[Any]
    reports: Any  # the queue each agent puts its report on


def launch(url: str, groups: dict[str, list[int]], steps: int) -> Fleet:
    """The conversations made, then an agent process each (tests/fleet_agent.py), forked by
    a forkserver that has imported the library: dozens start in a moment."""
    with EventStore(url) as store:
        from . import factories as f

        for cid in groups:
            store.create_conversation(cid).append_many([f.system(), f.user(f"the task of {cid}")])
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["tests.fleet_agent"])
    out = ctx.Queue()
    processes = [ctx.Process(target=fleet_agent.run, args=(url, cid, agent, steps, out))
                 for cid, agents in groups.items() for agent in agents]
    for p in processes:
        p.start()
    return Fleet(processes, out)


def collect(fleet: Fleet, timeout: float = 240) -> list[dict]:
    reports = [fleet.reports.get(timeout=timeout) for _ in fleet.processes]
    for p in fleet.processes:
        p.join(30)
        assert p.exitcode == 0
    return reports


def stored_events(url: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM event").fetchone()[0]


def verify(url: str, groups: dict[str, list[int]], reports: list[dict]) -> None:
    """Everything the fleet was told was written is there, once, in gap-free conversations
    whose condensations are sound; the doctor finds nothing; search finds every token."""
    by_agent = {r["agent"]: r for r in reports}
    with EventStore(url) as store:
        for cid, agents in groups.items():
            conv = store.conversation(cid)
            events = list(conv.events())
            assert [e.seq for e in events] == list(range(len(events))), f"{cid}: ids not gap-free"
            calls = [e.tool_call_id for e in events if isinstance(e, ActionEvent)]
            assert len(calls) == len(set(calls)), f"{cid}: a step stored twice"
            results = {e.tool_call_id for e in events if isinstance(e, ObservationEvent)}
            assert results == set(calls), f"{cid}: a call without its result, or the reverse"
            for agent in agents:
                mine = {c for c in calls if c.startswith(f"a{agent}s")}
                sent = {call_id(agent, s) for s in by_agent[agent]["acknowledged"]}
                maybe = {call_id(agent, s) for s in by_agent[agent]["uncertain"]}
                assert sent <= mine, f"agent {agent}: acknowledged steps lost: {sorted(sent - mine)[:5]}"
                assert mine <= sent | maybe, f"agent {agent}: steps stored it never sent: {sorted(mine - sent - maybe)[:5]}"
            assert any(isinstance(e, Condensation) for e in events), f"{cid}: never condensed"
            forgotten_stays_forgotten(store, cid)
            tokens = [(a, s) for a in agents for s in by_agent[a]["acknowledged"] if s % 10 == 0]
            for agent, step in tokens:
                hits = conv.search(planted(agent, step), scope="all", limit=3)
                assert any(planted(agent, step) in h.snippet for h in hits), f"{cid}: {planted(agent, step)} not found"
    run("doctor", url, "--full")  # exit status 0: healthy


def test_a_fleet_through_pgbouncer_leaves_every_conversation_whole(fleet):
    url, direct, _ = fleet
    groups = plan(AGENTS, SHARING)
    reports = collect(launch(url, groups, STEPS))
    errors = [e for r in reports for e in r["errors"]]
    assert errors == [], f"{len(errors)} errors: {errors[:3]}"
    assert all(len(r["acknowledged"]) == STEPS for r in reports)
    verify(url, groups, reports)


def test_a_fleet_goes_on_through_a_pooler_restart_and_terminated_backends(fleet):
    url, direct, pooler = fleet
    groups = plan(FAULT_AGENTS, 8)
    expected = 2 * FAULT_AGENTS * FAULT_STEPS
    agents = launch(url, groups, FAULT_STEPS)
    try:
        for share, fault in ((0.3, "restart"), (0.6, "terminate")):
            deadline = time.monotonic() + 120
            while stored_events(direct) < share * expected and time.monotonic() < deadline:
                time.sleep(0.1)
            if fault == "restart":
                pooler.restart()
            else:
                with psycopg.connect(direct, autocommit=True) as admin:
                    ended = admin.execute("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) "
                                          "FROM pg_stat_activity WHERE datname = current_database() "
                                          "AND pid <> pg_backend_pid()").fetchone()[0]
                assert ended >= 1
    finally:
        reports = collect(agents)
    errors = [e for r in reports for e in r["errors"]]
    kinds = {k for r in reports for k in r["kinds"]}
    # Each failure is one line naming the database: a connection lost under a command (the
    # restart, the terminated backends) or, while the pooler was down, one not made.
    assert errors and all("\n" not in e and e.startswith(url) for e in errors), errors[:3]
    assert kinds <= {"ConnectionLost", "DatabaseUnreachable"}, kinds
    # The survivors went on: every agent finished its loop, most of its steps acknowledged.
    assert all(len(r["acknowledged"]) + len(r["uncertain"]) >= FAULT_STEPS - len(r["errors"]) for r in reports)
    verify(url, groups, reports)
