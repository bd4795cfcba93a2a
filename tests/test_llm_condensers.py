"""The LLM condensers against a real OpenAI-compatible HTTP server (litellm's own request path).

Every test drives ``conv.step`` / ``conv.condense`` on a stored conversation, with the model
scripted by ``tests/llm_server.FakeLLMServer``; nothing in litellm is patched. What is checked:

* multi-round histories (parallel batches, thinking loops, tool errors, long outputs) for the
  three strategies: rolling summaries, lossless summarizer input, well-formed views after every
  round, and a ledger (``llm_call``) that matches the HTTP requests the server received;
* every fault the server can produce, against a SOFT trigger (too many events) and a HARD one
  (an explicit request, and once a token limit), with each ``hard_fallback``: the database is
  left as it was, apart from the ledger and, where the fallback writes one, its condensation;
* StructuredSummary's function call and LLMAttention's JSON ranking, including bad replies;
* the offline summarizer as the default when no model is configured.
"""

from __future__ import annotations

import json
import random
import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from openhands_memory.condensers.llm_attention import LLMAttentionCondenser
from openhands_memory.condensers.llm_base import SummarizerFailed
from openhands_memory.condensers.llm_summarizing import LLMSummarizingCondenser
from openhands_memory.condensers.structured_summary import StructuredSummaryCondenser
from openhands_memory.events import (
    ActionEvent,
    AgentErrorEvent,
    Condensation,
    CondensationSummaryEvent,
    Event,
    Message,
    MessageEvent,
    ObservationEvent,
    TextContent,
    UserRejectObservation,
)
from openhands_memory.llm import LLMConfig
from openhands_memory.conversation import EventStore
from openhands_memory.summarizers import HEADER as OFFLINE_HEADER
from openhands_memory.view import View

from . import factories as f
from .llm_server import FakeLLMServer

MODEL = "openai/test-model"
STATE_FIELDS = [
    "user_context", "completed_tasks", "pending_tasks", "current_state", "files_modified",
    "function_changes", "data_structures", "tests_written", "tests_passing", "failing_tests",
    "error_messages", "branch_created", "branch_name", "commits_made", "pr_created", "pr_status",
    "dependencies", "other_relevant_context",
]
RESULT_TYPES = (ObservationEvent, AgentErrorEvent, UserRejectObservation)


@pytest.fixture(scope="module")
def template_db(tmp_path_factory) -> Path:
    """An empty database made once; each test starts from a copy (creating one costs ~0.2 s)."""
    path = tmp_path_factory.mktemp("template") / "memory.db"
    EventStore(path).close()
    return path


@pytest.fixture
def db_path(tmp_path, template_db) -> Path:  # overrides conftest's: the store opens a copy
    path = tmp_path / "memory.db"
    shutil.copyfile(template_db, path)
    return path


def make_config(server: FakeLLMServer, **overrides: Any) -> LLMConfig:
    values: dict[str, Any] = dict(
        model=MODEL, api_base=server.url, api_key="sk-test", timeout=5.0, num_retries=1,
        retry_min_wait=0.01, retry_max_wait=0.05,
    )
    values.update(overrides)
    return LLMConfig(**values)


# --------------------------------------------------------------------------- a simulated agent


WORDS = (
    "the parser returns a list of tokens while the cache keeps every value it has seen and "
    "raises KeyError when the config is missing so the handler retries the request twice"
).split()


@dataclass
class Agent:
    """Appends a deterministic coding-agent history, whole turns at a time.

    ``history`` holds every appended event (with its store id); ``needles[seq]`` the strings a
    lossless rendering of that event must contain (tool arguments, full outputs, thoughts).
    """

    conv: Any
    seed: int = 0
    history: list[Event] = field(default_factory=list)
    needles: dict[int, list[str]] = field(default_factory=dict)
    n: int = 0
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def next(self) -> int:
        self.n += 1
        return self.n

    def append(self, turn: list[tuple[Event, list[str]]]) -> None:
        seqs = self.conv.append_many([e for e, _ in turn])
        for (e, needles), seq in zip(turn, seqs):
            self.history.append(e)
            self.needles[seq] = needles

    def start(self, task: str = "Fix the crash in src/pkg/parser.py; keep the public API.") -> None:
        self.append([(f.system(), []), (f.user(task), [task])])

    def filler(self, chars: int) -> str:
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < chars:
            words.append(self.rng.choice(WORDS))
            if self.rng.random() < 0.08:
                words.append("\n")
        return " ".join(words)

    def batch(self, *, think: bool = False) -> list[tuple[Event, list[str]]]:
        """One model response: 1-3 parallel tool calls, then their results in order."""
        rid = f"resp-{self.next()}"
        actions: list[tuple[Event, list[str]]] = []
        results: list[tuple[Event, list[str]]] = []
        for j in range(self.rng.randint(1, 3)):
            k = self.next()
            call = f"call-{k}"
            thought = f"THOUGHT{k} check the failing case" if j == 0 else ""
            if self.rng.random() < 0.5:
                tool, args = "terminal", {"command": f"pytest tests/test_mod{k}.py -k ARG{k}"}
                needles = [f"pytest tests/test_mod{k}.py -k ARG{k}"]
            else:
                path = f"src/pkg/mod{k}.py"
                args = {"command": "str_replace", "path": path, "old_str": f"OLD{k}", "new_str": f"NEW{k}"}
                tool, needles = "file_editor", [path, f"OLD{k}", f"NEW{k}"]
            ev = f.action(rid, call, think=think and j == 0, thought=thought, tool=tool, args=args)
            actions.append((ev, needles + ([thought] if thought else [])))
            if self.rng.random() < 0.15:
                text = f"ERR{k}: exit status 2, no such option"
                results.append((f.error(call, text, tool=tool), [text]))
            else:
                size = self.rng.choice([40, 120, 700, 1500])
                text = f"OUT{k} {self.filler(size)} END{k}"
                results.append((f.observation(call, text, tool=tool), [text]))
        return actions + results

    def message(self, source: str) -> tuple[Event, list[str]]:
        k = self.next()
        text = f"MSG{k} {self.filler(60)}"
        if source == "user":
            return f.user(text), [text]
        ev = MessageEvent(
            source="agent",
            llm_message=Message(role="assistant", content=[TextContent(text=text)]),
            llm_response_id=f"resp-{k}",
        )
        return ev, [text]

    def turn(self) -> None:
        roll = self.rng.random()
        if roll < 0.5:
            self.append(self.batch())
        elif roll < 0.75:  # a thinking loop: batches of one reasoning run, closed by a reply
            events = self.batch(think=True)
            if self.rng.random() < 0.6:
                events += self.batch()
            self.append(events + [self.message("agent")])
        elif roll < 0.88:
            self.append([self.message("user")])
        else:
            self.append([self.message("agent")])

    def grow_past(self, size: int) -> None:
        while len(self.conv.view()) <= size:
            self.turn()

    def grow_to(self, low: int, high: int) -> None:
        """Append turns until the view holds between ``low`` and ``high`` events."""
        while len(self.conv.view()) < low:
            self.turn()
        assert len(self.conv.view()) <= high, "the seed overshot; pick another"


# --------------------------------------------------------------------------- checks


def loops(history: list[Event]) -> list[set[int]]:
    """Thinking loops over the whole history: a run of actions and results that starts at an
    action with thinking blocks; any other event ends it."""
    found: list[set[int]] = []
    current: set[int] | None = None
    for e in history:
        if isinstance(e, ActionEvent) and e.thinking_blocks and current is None:
            current = {e.seq}
        elif isinstance(e, (ActionEvent, *RESULT_TYPES)) and current is not None:
            current.add(e.seq)
        else:
            if current:
                found.append(current)
            current = None
    if current:
        found.append(current)
    return found


def assert_well_formed(view: View, history: list[Event]) -> None:
    events = list(view)
    assert not view.dropped, f"enforcement had to drop events: {view.dropped}"
    assert sum(isinstance(e, CondensationSummaryEvent) for e in events) <= 1
    where = {e.tool_call_id: i for i, e in enumerate(events) if isinstance(e, ActionEvent)}
    answers = [e.tool_call_id for e in events if isinstance(e, RESULT_TYPES)]
    assert len(where) == sum(isinstance(e, ActionEvent) for e in events)
    assert sorted(where) == sorted(answers), "unpaired tool call or result"
    for i, e in enumerate(events):
        if isinstance(e, RESULT_TYPES):
            assert where[e.tool_call_id] < i, "a result before its call"
    shown = {e.seq for e in events if e.seq is not None}
    batches: dict[str, set[int]] = defaultdict(set)
    for e in history:
        if isinstance(e, ActionEvent):
            batches[e.llm_response_id].add(e.seq)
    for rid, seqs in batches.items():
        assert seqs <= shown or not seqs & shown, f"batch {rid} split"
    for loop in loops(history):
        assert loop <= shown or not loop & shown, f"thinking loop {sorted(loop)} split"
    open_calls: set[str] = set()
    for m in view.to_messages():
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_calls
            open_calls.discard(m["tool_call_id"])
            continue
        assert not open_calls, f"unanswered calls {open_calls}"
        open_calls = {c["id"] for c in m.get("tool_calls") or []}
    assert not open_calls


def assert_rich(history: list[Event]) -> None:
    """The generated history has the shapes the condensers must handle."""
    sizes: dict[str, int] = defaultdict(int)
    for e in history:
        if isinstance(e, ActionEvent):
            sizes[e.llm_response_id] += 1
    assert max(sizes.values()) > 1, "no parallel batch"
    assert any(isinstance(e, ActionEvent) and e.thinking_blocks for e in history), "no thinking loop"
    assert any(isinstance(e, AgentErrorEvent) for e in history), "no tool error"
    assert any(isinstance(e, ObservationEvent) and len(json.dumps(e.observation)) > 1000 for e in history)


def message_text(request: dict[str, Any]) -> str:
    out = []
    for m in request["messages"]:
        content = m.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out += [p.get("text", "") for p in content if isinstance(p, dict)]
    return "\n".join(out)


def assert_no_cache_control(server: FakeLLMServer) -> None:
    for request in server.requests:
        assert "cache_control" not in json.dumps(request)


LEDGER_COLUMNS = (
    "strategy", "purpose", "model", "prompt_tokens", "completion_tokens", "cost_usd", "latency_s",
    "outcome", "error", "response_id", "attempts", "condensation_id",
)


def ledger(store: EventStore) -> list[dict[str, Any]]:
    rows = store.db.execute(f"SELECT {', '.join(LEDGER_COLUMNS)} FROM llm_call ORDER BY id").fetchall()
    return [dict(zip(LEDGER_COLUMNS, r)) for r in rows]


def dump(store: EventStore, *, without: int | None = None) -> dict[str, list[tuple]]:
    """Every table but ``llm_call``; ``without``: leave out the rows of that condensation."""
    out: dict[str, list[tuple]] = {}
    tables = store.db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'llm_call' ORDER BY name"
    ).fetchall()
    for (table,) in tables:
        cols = [c[1] for c in store.db.execute(f"PRAGMA table_info({table})")]
        rows = store.db.execute(f"SELECT * FROM {table}").fetchall()
        key = {"event": "id", "condensation": "id", "forgotten_range": "condensation_id",
               "hidden_run": "from_id"}.get(table)
        if without is not None and key is not None:
            rows = [r for r in rows if r[cols.index(key)] != without]
        out[table] = sorted(rows, key=repr)
    return out


def condensation_ids(store: EventStore) -> list[int]:
    return [r[0] for r in store.db.execute("SELECT id FROM condensation ORDER BY id")]


def condensation_row(store: EventStore, seq: int) -> dict[str, Any]:
    cur = store.db.execute("SELECT * FROM condensation WHERE id = ?", (seq,))
    names = [d[0] for d in cur.description]
    return dict(zip(names, cur.fetchone()))


def shape(view: View) -> list[tuple[str, int | None, str]]:
    return [(e.kind, e.seq, e.id) for e in view]


# --------------------------------------------------------------------------- scripted replies


def push_success(server: FakeLLMServer, strategy: str, view: View, *, tag: str = "S",
                 prompt_tokens: int = 10, completion_tokens: int = 5) -> Any:
    """A good reply for ``strategy``; returns what should show up (summary text, or ids)."""
    if strategy == "llm":
        text = f"{tag}: the user wants the parser fixed; mod files edited; tests still failing."
        server.push_text(text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
        return text
    if strategy == "structured":
        args = {name: f"{tag}-{name}-value" for name in STATE_FIELDS}
        server.push_tool_call(
            "create_state_summary", args, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
        return args
    ids = [e.seq for e in view if e.seq is not None][-3:]
    server.push_json({"ids": ids}, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    return ids


def make_condenser(strategy: str, config: LLMConfig | None, **kw: Any):
    cls = {
        "llm": LLMSummarizingCondenser,
        "structured": StructuredSummaryCondenser,
        "llm_attention": LLMAttentionCondenser,
    }[strategy]
    return cls(llm_config=config, **kw)


PURPOSE = {"llm": "summary", "structured": "structured_summary", "llm_attention": "attention"}


# =========================================================================== multi-round runs


@dataclass
class Expected:
    """The ledger row each HTTP request should have produced."""

    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(self, strategy: str, n: int, prompt: int, completion: int, cond: int) -> None:
        self.rows.append(dict(
            strategy=strategy, purpose=PURPOSE[strategy], model=MODEL, prompt_tokens=prompt,
            completion_tokens=completion, outcome="ok", error=None, response_id=f"chatcmpl-{n}",
            attempts=1, condensation_id=cond,
        ))


def check_ledger(store: EventStore, server: FakeLLMServer, expected: Expected) -> None:
    rows = ledger(store)
    assert len(rows) == len(server.requests) == len(expected.rows)
    for row, want in zip(rows, expected.rows):
        assert {k: row[k] for k in want} == want
        assert row["latency_s"] > 0
        assert row["cost_usd"] is None  # litellm has no price for test-model


@pytest.mark.parametrize("strategy", ["llm", "structured"])
def test_rolling_summaries_over_many_rounds(store, conv, llm_server, strategy):
    agent = Agent(conv, seed=7)
    agent.start()
    condenser = make_condenser(strategy, make_config(llm_server), max_size=24, keep_first=2)
    expected = Expected()
    previous: str | None = None
    for rnd in range(6):
        agent.grow_past(24)
        before = conv.view()
        assert before.summary_event is None or before.summary_event.summary == previous
        sent = push_success(llm_server, strategy, before, tag=f"R{rnd}",
                            prompt_tokens=1000 + rnd, completion_tokens=50 + rnd)
        n_before = len(llm_server.requests)

        after = conv.step(condenser)

        # one request, whose reply became the one summary in the view, at keep_first
        assert len(llm_server.requests) == n_before + 1
        request = llm_server.requests[-1]
        text = message_text(request)
        if previous is not None:
            assert previous in text, "the previous summary was not handed over in full"
        summaries = [e for e in after if isinstance(e, CondensationSummaryEvent)]
        assert len(summaries) == 1 and after.events[2] is summaries[0]
        summary = summaries[0].summary
        if strategy == "llm":
            assert summary == sent
        else:
            for value in sent.values():
                assert value in summary
            assert request["tool_choice"] == {"type": "function", "function": {"name": "create_state_summary"}}
        # what was forgotten reached the model losslessly: arguments, thoughts, full outputs
        gone = {e.seq for e in before if e.seq is not None} - {e.seq for e in after}
        assert gone
        for seq in gone:
            for needle in agent.needles[seq]:
                assert needle in text, f"event {seq}: {needle[:60]!r} missing from the request"
        # the head stayed, the view shrank to at most max_size // 2, and it is well-formed
        assert [e.seq for e in after.events[:2]] == [0, 1]
        assert len(after) <= 24 // 2
        assert_well_formed(after, agent.history)
        assert shape(conv.view()) == shape(after)
        cond = condensation_ids(store)[-1]
        row = condensation_row(store, cond)
        assert (row["summary"], row["summary_offset"], row["strategy"]) == (summary, 2, strategy)
        expected.add(strategy, len(llm_server.requests), 1000 + rnd, 50 + rnd, cond)
        check_ledger(store, llm_server, expected)
        previous = summary
    assert len(condensation_ids(store)) == 6
    assert_rich(agent.history)
    assert_no_cache_control(llm_server)


def test_attention_ranking_over_many_rounds(store, conv, llm_server):
    agent = Agent(conv, seed=11)
    agent.start()
    max_size = 24
    condenser = LLMAttentionCondenser(llm_config=make_config(llm_server), max_size=max_size, keep_first=2)
    expected = Expected()
    target = max_size // 2
    for rnd in range(6):
        agent.grow_past(max_size)
        before = conv.view()
        # Pick two older actions the newest-first back-fill would drop, and rank them first,
        # among ids the model was never shown and repeats.
        old = [e.seq for e in before.events[2 : len(before) - target] if isinstance(e, ActionEvent)]
        chosen = old[:1] + old[-1:] if len(old) > 1 else old
        shown = [e.seq for e in before if e.seq is not None]
        ranking = [-5, *chosen, chosen[0] if chosen else 0, 10**9, "7", shown[0], shown[-1]]
        llm_server.push_json({"ids": ranking}, prompt_tokens=300 + rnd, completion_tokens=9 + rnd)

        after = conv.step(condenser)

        request = llm_server.requests[-1]
        assert request["response_format"]["type"] == "json_schema"
        schema = request["response_format"]["json_schema"]["schema"]
        assert schema["properties"]["ids"] == {"type": "array", "items": {"type": "integer"}}
        text = message_text(request)
        for seq in shown:  # every event is offered in full
            for needle in agent.needles[seq]:
                assert needle in text
        kept = {e.seq for e in after}
        assert chosen and chosen[0] in kept, "the top-ranked event was forgotten"
        assert kept == expected_keep(before, ranking, keep_first=2, target=target)
        assert {0, 1} <= kept
        assert not any(isinstance(e, CondensationSummaryEvent) for e in after)
        biggest = max(len(u) for u in _units(before))
        assert target <= len(after) <= target + biggest - 1
        assert_well_formed(after, agent.history)
        cond = condensation_ids(store)[-1]
        assert condensation_row(store, cond)["summary"] is None
        expected.add("llm_attention", len(llm_server.requests), 300 + rnd, 9 + rnd, cond)
        check_ledger(store, llm_server, expected)
    assert len(condensation_ids(store)) == 6
    assert_rich(agent.history)
    assert_no_cache_control(llm_server)


def _units(view: View) -> list[range]:
    """The smallest pieces of the view that can be kept or forgotten alone."""
    cuts = sorted(view.manipulation_indices)
    return [range(a, b) for a, b in zip(cuts, cuts[1:])]


def expected_keep(view: View, ranking: list[Any], *, keep_first: int, target: int) -> set[int]:
    """The store ids LLMAttention should keep: the head, then the model's valid ids in its
    order, then the newest events, each with its whole unit, until ``target`` is reached."""
    unit_of = {p: u for u in _units(view) for p in u}
    position = {e.seq: p for p, e in enumerate(view) if e.seq is not None}
    keep: set[int] = set()
    for p in range(keep_first):
        keep.update(unit_of[p])
    valid = [position[i] for i in ranking if isinstance(i, int) and not isinstance(i, bool) and i in position]
    for p in valid + list(range(len(view) - 1, -1, -1)):
        if len(keep) >= target:
            break
        keep.update(unit_of[p])
    return {view.events[p].seq for p in keep}


# =========================================================================== lossless input


def test_summarizer_input_is_lossless(store, conv, llm_server):
    conv.append_many([f.system(), f.user("Tidy up the config loader.")])
    long_output = "BEGIN-OUTPUT " + " ".join(f"line{i}" for i in range(400)) + " LATE-DETAIL END-OUTPUT"
    assert len(long_output) > 2000
    args = {"command": "create", "path": "src/conf/loader.py", "file_text": "def load(path):\n    return {}\n"}
    conv.append_many([
        f.action("r1", "c1", tool="file_editor", args=args, thought="write the loader first"),
        f.observation("c1", long_output, tool="file_editor"),
    ])
    for i in range(2, 8):
        conv.append_many([f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}")])
    llm_server.push_text("summary")
    conv.step(LLMSummarizingCondenser(llm_config=make_config(llm_server), max_size=10, keep_first=2))
    text = message_text(llm_server.requests[0])
    assert long_output in text  # whole, including what lies past 500 characters
    assert "LATE-DETAIL" in text
    assert "src/conf/loader.py" in text and "def load(path):" in text
    assert "write the loader first" in text


def test_long_event_is_cut_keeping_head_and_tail(store, conv, llm_server):
    conv.append_many([f.system(), f.user("Find the bug.")])
    huge = "HEAD-MARK " + "a" * 2500 + " MIDDLE-MARK " + "b" * 2500 + " TAIL-MARK"
    conv.append_many([f.action("r1", "c1"), f.observation("c1", huge)])
    for i in range(2, 8):
        conv.append_many([f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}")])
    llm_server.push_text("summary")
    condenser = LLMSummarizingCondenser(
        llm_config=make_config(llm_server), max_size=10, keep_first=2, max_event_length=1000
    )
    conv.step(condenser)
    text = message_text(llm_server.requests[0])
    assert "HEAD-MARK" in text and "TAIL-MARK" in text
    assert "MIDDLE-MARK" not in text
    assert "a" * 2000 not in text and "b" * 2000 not in text
    # the cut event is at most max_event_length long: its text between the markers is short
    head, tail = text.index("HEAD-MARK"), text.index("TAIL-MARK")
    assert tail - head < 1000


# =========================================================================== faults

FAULTS = ["429", "500", "slow", "malformed_json", "empty", "context_window"]
FAILED_OUTCOME = {
    "500": "server_error", "slow": "timeout", "malformed_json": "bad_response",
    "empty": "bad_response", "context_window": "context_window",
}
NUM_RETRIES = 1
RESET_RETRIES = 2  # hard_context_reset_max_retries in the fault tests


def fault_setup(conv, llm_server, strategy: str, mode: str, **kw: Any):
    """A conversation that needs condensing: SOFT (too many events) or HARD (a request)."""
    agent = Agent(conv, seed=3)
    agent.start()
    if mode == "soft":
        agent.grow_past(20)
    else:
        agent.grow_to(14, 20)
        conv.request_condensation()
    # 1 s: long enough for an answer on a loaded machine, short of the "slow" fault's 2 s.
    config = make_config(llm_server, timeout=1.0, num_retries=NUM_RETRIES)
    condenser = make_condenser(
        strategy, config, max_size=20, keep_first=2,
        hard_context_reset_max_retries=RESET_RETRIES,
        hard_fallback="raise" if mode == "raise" else kw.pop("hard_fallback", "offline"), **kw,
    )
    return agent, condenser


def push_fault(server: FakeLLMServer, fault: str) -> int:
    """Script ``fault`` so that the call fails for good; returns how many requests it takes."""
    if fault in ("500", "slow"):
        for _ in range(NUM_RETRIES + 1):
            server.push_fault(fault, seconds=1.0)
        return NUM_RETRIES + 1
    if fault == "context_window":
        for _ in range(RESET_RETRIES):
            server.push_fault(fault)
        return RESET_RETRIES
    server.push_fault(fault)
    return 1


def offline_twin(strategy: str, conv, condenser) -> Condensation:
    """What the same condenser does without a model: the default HARD fallback's result."""
    twin = make_condenser(strategy, None, max_size=condenser.max_size, keep_first=condenser.keep_first)
    result = conv.condense(twin, dry_run=True).result
    assert isinstance(result, Condensation)
    return result


@pytest.mark.parametrize("mode", ["soft", "hard", "raise"])
@pytest.mark.parametrize("strategy", ["llm", "structured", "llm_attention"])
def test_rate_limit_then_success(store, conv, llm_server, strategy, mode):
    agent, condenser = fault_setup(conv, llm_server, strategy, mode)
    llm_server.push_fault("429")
    sent = push_success(llm_server, strategy, conv.view(), tag="AFTER-429", prompt_tokens=77)
    after = conv.step(condenser)
    assert len(llm_server.requests) == 2 and llm_server.pending == 0
    (cond,) = condensation_ids(store)
    (row,) = ledger(store)
    assert (row["outcome"], row["attempts"], row["condensation_id"]) == ("ok", 2, cond)
    assert (row["response_id"], row["prompt_tokens"]) == ("chatcmpl-2", 77)
    if strategy == "llm":
        assert after.summary_event.summary == sent
    elif strategy == "structured":
        assert all(v in after.summary_event.summary for v in sent.values())
    else:
        assert set(sent) <= {e.seq for e in after}
    assert_well_formed(after, agent.history)


# An empty reply is no failure for StructuredSummary: it summarizes offline (tested below).
FAULT_CASES = [
    (strategy, fault, mode)
    for strategy in ("llm", "structured", "llm_attention")
    for fault in FAULTS
    if fault != "429" and not (strategy == "structured" and fault == "empty")
    for mode in ("soft", "hard", "raise")
]


@pytest.mark.parametrize(("strategy", "fault", "mode"), FAULT_CASES)
def test_fault_leaves_the_database_as_it_was(store, conv, llm_server, strategy, fault, mode):
    agent, condenser = fault_setup(conv, llm_server, strategy, mode)
    view = conv.view()
    twin = offline_twin(strategy, conv, condenser) if mode == "hard" else None
    before = dump(store)
    requests = push_fault(llm_server, fault)

    if mode == "raise":
        with pytest.raises(SummarizerFailed):
            conv.step(condenser)
        result = None
    else:
        result = conv.step(condenser)

    assert len(llm_server.requests) == requests and llm_server.pending == 0
    rows = ledger(store)
    assert len(rows) == (RESET_RETRIES if fault == "context_window" else 1)
    for row in rows:
        assert row["outcome"] == FAILED_OUTCOME[fault]
        assert row["condensation_id"] is None
        assert row["error"]
        assert row["strategy"] == strategy and row["purpose"] == PURPOSE[strategy]
        assert row["attempts"] == (NUM_RETRIES + 1 if fault in ("500", "slow") else 1)
    if fault == "context_window":  # each retry cut the events shorter
        lengths = [len(message_text(r)) for r in llm_server.requests]
        assert lengths[1] < lengths[0]

    if mode != "hard":
        assert dump(store) == before
        assert condensation_ids(store) == []
        if mode == "soft":
            assert shape(result) == shape(view)
        assert shape(conv.view()) == shape(view)
        return
    # HARD with the default fallback: the offline result, and nothing else, was written
    (cond,) = condensation_ids(store)
    assert dump(store, without=cond) == before
    stored = conv.get(cond)
    assert stored.forgotten_ranges == twin.forgotten_ranges
    assert (stored.summary, stored.summary_offset) == (twin.summary, twin.summary_offset)
    if strategy == "llm_attention":
        assert stored.summary is None
    else:
        assert stored.summary.startswith(OFFLINE_HEADER)
    assert condensation_row(store, cond)["reason"].endswith("fallback=offline")
    assert shape(result) == shape(conv.view())
    assert_well_formed(result, agent.history)


def test_token_trigger_is_hard(store, conv, llm_server):
    agent = Agent(conv, seed=5)
    agent.start()
    agent.grow_to(14, 20)
    condenser = LLMSummarizingCondenser(
        llm_config=make_config(llm_server, timeout=1.0, num_retries=NUM_RETRIES),
        max_size=1000, keep_first=2, tokenizer="chars/4", max_tokens=600,
    )
    assert condenser.view_tokens(conv.view(), conv.tokens) > 600  # counts are cached in the rows now
    before = dump(store)
    for _ in range(NUM_RETRIES + 1):
        llm_server.push_fault("500")
    after = conv.step(condenser)
    (cond,) = condensation_ids(store)
    assert dump(store, without=cond) == before
    assert conv.get(cond).summary.startswith(OFFLINE_HEADER)
    assert condensation_row(store, cond)["reason"] == "tokens;fallback=offline"
    assert [r["condensation_id"] for r in ledger(store)] == [None]
    assert_well_formed(after, agent.history)


def test_token_trigger_with_a_model_tokenizer(store, conv, llm_server):
    agent = Agent(conv, seed=5)
    agent.start()
    agent.grow_to(14, 20)
    condenser = LLMSummarizingCondenser(
        llm_config=make_config(llm_server), max_size=1000, keep_first=2, tokenizer="gpt-4o", max_tokens=600,
    )
    llm_server.push_text("token summary")
    after = conv.step(condenser)
    (cond,) = condensation_ids(store)
    row = condensation_row(store, cond)
    assert row["reason"] == "tokens"
    assert row["tokens_before"] > 600 > row["tokens_after"]
    assert condenser.view_tokens(after, conv.tokens) <= 600
    assert after.summary_event.summary == "token summary"
    assert [r["condensation_id"] for r in ledger(store)] == [cond]
    assert_well_formed(after, agent.history)


def test_context_window_then_success_shrinks_the_events(store, conv, llm_server):
    """The retry after an overflow must send less, even when no event reached max_event_length."""
    agent = Agent(conv, seed=3)
    agent.start()
    # the longest event, soon forgotten, is far below the default max_event_length (10_000)
    conv.append_many([f.user("U" * 3000)])
    agent.grow_past(20)
    llm_server.push_fault("context_window")
    llm_server.push_text("fits now")
    condenser = LLMSummarizingCondenser(llm_config=make_config(llm_server), max_size=20, keep_first=2)
    view = conv.step(condenser)
    first, second = (message_text(r) for r in llm_server.requests)
    assert len(second) < len(first)
    assert "U" * 3000 in first and "U" * 3000 not in second
    assert view.summary_event.summary == "fits now"
    (cond,) = condensation_ids(store)
    rows = ledger(store)
    assert [(r["outcome"], r["condensation_id"]) for r in rows] == [("context_window", None), ("ok", cond)]
    assert rows[1]["response_id"] == "chatcmpl-2"


def test_context_window_with_a_small_max_event_length(store, conv, llm_server):
    conv.append_many([f.system(), f.user("go")])
    conv.append_many([f.action("r1", "c1"), f.observation("c1", "x" * 5000)])
    for i in range(2, 8):
        conv.append_many([f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}")])
    llm_server.push_fault("context_window")
    llm_server.push_text("ok")
    condenser = LLMSummarizingCondenser(
        llm_config=make_config(llm_server), max_size=10, keep_first=2, max_event_length=2000,
        hard_context_reset_context_scaling=0.5,
    )
    conv.step(condenser)
    first, second = (message_text(r) for r in llm_server.requests)
    # cut to 2000 characters, then to half of that, keeping head and tail each time
    assert 1900 < first.count("xxxxxxxxxx") * 10 <= 2000
    assert 850 < second.count("xxxxxxxxxx") * 10 <= 1000
    assert len(second) < len(first) - 900


def test_hard_reset_fallback_summarizes_everything_after_the_system_prompt(store, conv, llm_server):
    agent, condenser = fault_setup(conv, llm_server, "llm", "hard", hard_fallback="reset")
    view = conv.view()
    for _ in range(NUM_RETRIES + 1):
        llm_server.push_fault("500")
    llm_server.push_fault("context_window")  # the reset's own call overflows once
    llm_server.push_text("RESET SUMMARY")
    after = conv.step(condenser)
    requests = llm_server.requests
    assert len(requests) == NUM_RETRIES + 3
    # the reset call saw everything after the system prompt, including the user's task
    assert "Fix the crash in src/pkg/parser.py" in message_text(requests[-2])
    assert len(message_text(requests[-1])) < len(message_text(requests[-2]))
    (cond,) = condensation_ids(store)
    assert after.events[0].seq == 0 and after.events[1].summary == "RESET SUMMARY"
    last = view.manipulation_indices.find_previous(len(view))
    assert [e.seq for e in after.events[2:]] == [e.seq for e in view.events[last:]]
    assert condensation_row(store, cond)["reason"].endswith("fallback=reset")
    assert [(r["outcome"], r["condensation_id"]) for r in ledger(store)] == [
        ("server_error", None), ("context_window", None), ("ok", cond)
    ]
    assert_well_formed(after, agent.history)


# =========================================================================== StructuredSummary


def test_structured_request_and_full_rendering(store, conv, llm_server):
    agent, condenser = fault_setup(conv, llm_server, "structured", "soft")
    args = {name: f"value of {name} #{i}" for i, name in enumerate(STATE_FIELDS)}
    llm_server.push_tool_call("create_state_summary", args, prompt_tokens=900, completion_tokens=80)
    after = conv.step(condenser)
    (request,) = llm_server.requests
    (tool,) = request["tools"]
    assert tool["type"] == "function" and tool["function"]["name"] == "create_state_summary"
    params = tool["function"]["parameters"]
    assert list(params["properties"]) == STATE_FIELDS
    assert all(p["type"] == "string" and p["description"] for p in params["properties"].values())
    assert {"user_context", "completed_tasks", "pending_tasks"} <= set(params["required"])
    assert request["tool_choice"] == {"type": "function", "function": {"name": "create_state_summary"}}
    summary = after.summary_event.summary
    for value in args.values():
        assert value in summary
    (cond,) = condensation_ids(store)
    (row,) = ledger(store)
    assert (row["outcome"], row["condensation_id"], row["prompt_tokens"]) == ("ok", cond, 900)
    assert_no_cache_control(llm_server)


def test_structured_plain_text_reply_is_used_and_flagged(store, conv, llm_server):
    agent, condenser = fault_setup(conv, llm_server, "structured", "soft")
    llm_server.push_text("The user wants the parser fixed; two files were edited.")
    after = conv.step(condenser)
    assert after.summary_event.summary == "The user wants the parser fixed; two files were edited."
    (cond,) = condensation_ids(store)
    (row,) = ledger(store)
    assert row["outcome"] == "bad_response" and "create_state_summary" in row["error"]
    # its text went into the stored condensation
    assert row["condensation_id"] == cond
    assert row["response_id"] == "chatcmpl-1"
    assert_well_formed(after, agent.history)


@pytest.mark.parametrize(
    "reply",
    [
        ("tool", "{not json"),
        ("tool", "[1, 2]"),
        ("wrong_tool", {"user_context": "x"}),
        ("empty", None),
    ],
)
def test_structured_unusable_reply_falls_back_to_offline(store, conv, llm_server, reply):
    agent, condenser = fault_setup(conv, llm_server, "structured", "soft")
    twin = offline_twin("structured", conv, condenser)
    kind, payload = reply
    if kind == "tool":
        llm_server.push_tool_call("create_state_summary", payload)
    elif kind == "wrong_tool":
        llm_server.push_tool_call("something_else", payload)
    else:
        llm_server.push_fault("empty")
    after = conv.step(condenser)
    (cond,) = condensation_ids(store)
    assert conv.get(cond).summary == twin.summary
    assert after.summary_event.summary.startswith(OFFLINE_HEADER)
    (row,) = ledger(store)
    assert row["outcome"] == "bad_response" and row["error"]
    assert row["condensation_id"] is None  # the offline summarizer wrote it, not this reply
    assert_well_formed(after, agent.history)


def test_structured_non_string_fields_are_kept(store, conv, llm_server):
    agent, condenser = fault_setup(conv, llm_server, "structured", "soft")
    args = {"user_context": "fix parser", "completed_tasks": ["read file", "ran tests"],
            "pending_tasks": "commit", "tests_passing": False, "unknown_field": "ignored"}
    llm_server.push_tool_call("create_state_summary", args)
    after = conv.step(condenser)
    summary = after.summary_event.summary
    assert "fix parser" in summary and "read file" in summary and "ran tests" in summary
    assert "commit" in summary and "false" in summary
    assert "ignored" not in summary
    assert ledger(store)[0]["outcome"] == "ok"


# =========================================================================== LLMAttention


def test_attention_bogus_ids_are_ignored_and_backfilled(store, conv, llm_server):
    agent, condenser = fault_setup(conv, llm_server, "llm_attention", "soft")
    view = conv.view()
    actions = [e.seq for e in view.events[2:] if isinstance(e, ActionEvent)]
    pick = actions[0]
    llm_server.push_json({"ids": [pick, pick, pick, -1, 424242, 0, 1, "x", None, True]})
    after = conv.step(condenser)
    kept = {e.seq for e in after}
    assert pick in kept and {0, 1} <= kept
    target = condenser.max_size // 2
    biggest = max(len(u) for u in _units(view))
    assert target <= len(after) <= target + biggest - 1
    # apart from the picked unit and the head, the newest events fill the view
    newest = [e.seq for e in view.events[len(view) - 3 :]]
    assert set(newest) <= kept
    assert_well_formed(after, agent.history)
    (cond,) = condensation_ids(store)
    assert ledger(store)[0]["condensation_id"] == cond


@pytest.mark.parametrize("reply", ["no json at all", '{"ids": "1,2"}', "[1, 2, 3]"])
def test_attention_garbage_reply_hard_keeps_the_newest(store, conv, llm_server, reply):
    agent, condenser = fault_setup(conv, llm_server, "llm_attention", "hard")
    twin = offline_twin("llm_attention", conv, condenser)
    view = conv.view()
    llm_server.push_text(reply)
    after = conv.step(condenser)
    (cond,) = condensation_ids(store)
    assert conv.get(cond).forgotten_ranges == twin.forgotten_ranges
    kept = [e.seq for e in after]
    assert kept[:2] == [0, 1]
    # the newest events are kept, oldest forgotten
    assert kept[2:] == [e.seq for e in view.events[len(view) - (len(kept) - 2):]]
    (row,) = ledger(store)
    assert (row["outcome"], row["condensation_id"]) == ("bad_response", None)
    assert_well_formed(after, agent.history)


def test_attention_garbage_reply_soft_changes_nothing(store, conv, llm_server):
    agent, condenser = fault_setup(conv, llm_server, "llm_attention", "soft")
    view = conv.view()
    before = dump(store)
    llm_server.push_text("I think events 3 and 5 matter most.")
    after = conv.step(condenser)
    assert shape(after) == shape(view)
    assert dump(store) == before
    assert [r["outcome"] for r in ledger(store)] == ["bad_response"]


# =========================================================================== offline default


def test_offline_summarizer_is_the_default(store, conv, llm_server):
    conv.append_many([f.system(), f.user("Please add retry logic to src/net/client.py")])
    conv.append_many([
        f.action("r1", "c1", tool="file_editor",
                 args={"command": "str_replace", "path": "src/net/client.py",
                       "old_str": "send()", "new_str": "send_with_retry()"}),
        f.observation("c1", "The file src/net/client.py has been edited.", tool="file_editor"),
    ])
    for i in range(2, 8):
        conv.append_many([f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}")])
    condenser = LLMSummarizingCondenser(max_size=10, keep_first=1)
    assert condenser.llm_config is None
    after = conv.step(condenser)
    (cond,) = condensation_ids(store)
    summary = conv.get(cond).summary
    assert summary and after.summary_event.summary == summary
    assert 1 not in {e.seq for e in after}  # the user's request was forgotten ...
    assert "retry logic" in summary  # ... and the summary keeps it
    assert "src/net/client.py" in summary
    assert ledger(store) == [] and llm_server.requests == []


def test_attention_request_keeps_half_the_view(store, conv, llm_server):
    """A HARD request on a view below max_size still condenses it to about half."""
    agent, condenser = fault_setup(conv, llm_server, "llm_attention", "hard")
    view = conv.view()
    assert len(view) <= condenser.max_size
    llm_server.push_json({"ids": []})
    after = conv.step(condenser)
    assert {e.seq for e in after} == expected_keep(view, [], keep_first=2, target=len(view) // 2)
    assert len(after) < len(view)
    (cond,) = condensation_ids(store)
    assert [r["condensation_id"] for r in ledger(store)] == [cond]
    assert_well_formed(after, agent.history)


@pytest.mark.parametrize("mode", ["soft", "hard-reset"])
def test_a_reply_that_leads_nowhere_is_still_in_the_ledger(store, conv, llm_server, mode):
    """One thinking loop spans everything after the system prompt, so the ranking cannot be
    followed: SOFT keeps the view, a HARD request with ``reset`` forgets all after the system
    prompt. Either way the ranking call is in the ledger, attached to no condensation."""
    conv.append(f.system())
    events = [f.action("r1", "c1", think=True), f.action("r1", "c2"), f.action("r1", "c3"),
              f.observation("c1"), f.observation("c2"), f.observation("c3"),
              f.action("r2", "c4"), f.observation("c4")]
    conv.append_many(events)
    if mode != "soft":
        conv.request_condensation()
    view = conv.view()
    condenser = LLMAttentionCondenser(
        llm_config=make_config(llm_server), max_size=6, keep_first=1, hard_fallback="reset"
    )
    llm_server.push_json({"ids": [1]}, prompt_tokens=33)
    before = dump(store)
    after = conv.step(condenser)
    (row,) = ledger(store)
    assert (row["outcome"], row["condensation_id"], row["prompt_tokens"]) == ("ok", None, 33)
    if mode == "soft":
        assert shape(after) == shape(view) and dump(store) == before
        return
    (cond,) = condensation_ids(store)
    assert dump(store, without=cond) == before
    assert [e.seq for e in after] == [0]
    assert condensation_row(store, cond)["reason"] == "events,request;fallback=reset"
