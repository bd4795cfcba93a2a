"""History trees with the real SDK: a ``LocalConversation`` persisted through
``DatabaseFileStore`` runs, ``navigate_to`` an earlier observation and runs a new branch,
navigates to a message and to ``None`` (a new root), is resumed from the database and forked,
on SQLite and on PostgreSQL, with and without an SDKCondenser (a rolling offline summary, so
that condensations happen before and after the rewind).

After every navigation and every run, side by side with the SDK:

* the SDK's ``state.view`` is this library's view, id for id (summaries by their
  ``<condensation id>-summary`` ids): a fresh store's, the file store's own cached one, and
  what ``view --json`` prints;
* ``conv.head`` is the SDK's leaf (``_resolve_active_leaf``);
* ``doctor --full`` finds nothing wrong;
* nothing of an abandoned branch (a condensation or its summary) shows on the new one.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from openhands.sdk import LLM, Agent, LocalConversation
from openhands.sdk.context.view import View as SDKView
from openhands.sdk.conversation.state import ConversationState
from openhands.sdk.event import Condensation, MessageEvent, ObservationEvent
from openhands.sdk.workspace import LocalWorkspace
from pydantic import SecretStr

from openhands_memory.conversation import EventStore
from openhands_memory.inspection import doctor
from openhands_memory.integrations.openhands_sdk import DatabaseFileStore, SDKCondenser
from openhands_memory.io.sdk import export_folder
from tests.cli_runner import invoke
from tests.llm_server import FakeLLMServer, Reply

# A rolling summary (the offline summarizer: no model call) every 16 events.
ROLLING = '[condenser]\ntype = "llm"\nmax_size = 16\nkeep_first = 2\n'
EVERY = 7  # events between two checks while the agent runs


class Script:
    """The agent's model: ``left`` think steps (every seventh with two calls in one
    response), then finish."""

    def __init__(self) -> None:
        self.left = 0
        self.n = 0

    def __call__(self, body: dict) -> Reply:
        self.n += 1
        if self.left <= 0:
            return Reply("tool_call", tool_calls=[("finish", json.dumps({"message": f"done at {self.n}"}))])
        self.left -= 1
        calls = [("think", json.dumps({"thought": f"step {self.n}: " + "long " * (self.n % 11)}))]
        if self.n % 7 == 0:
            calls.append(("think", json.dumps({"thought": f"step {self.n}, second call"})))
        return Reply("tool_call", tool_calls=calls)


class Side:
    """One SDK conversation on the database, and the checks against this library."""

    def __init__(self, database: str, cid: uuid.UUID, llm_url: str, workspace: Path, condenser: str | None):
        self.database, self.cid, self.llm_url, self.workspace = database, cid, llm_url, workspace
        self.condenser = condenser
        self.abandoned: set[str] = set()  # ids (events and summaries) that must never show again
        self.seen = 0  # events the SDK has emitted (every EVERY-th: a check mid-run)
        self.open()

    def agent(self) -> Agent:
        llm = LLM(model="openai/test-model", base_url=self.llm_url, api_key=SecretStr("test-key"),
                  usage_id="agent", num_retries=0)
        return Agent(llm=llm, tools=[], condenser=SDKCondenser.from_toml(self.condenser) if self.condenser else None)

    def open(self) -> None:
        """A new conversation, or the SDK's resume of the stored one."""
        self.fs = DatabaseFileStore(self.database, self.cid)
        self.conversation = LocalConversation(
            agent=self.agent(), workspace=str(self.workspace), conversation_id=self.cid, file_store=self.fs,
            # (the SDK's forks persist beside it, as local folders: under the test's folder)
            persistence_dir=str(self.workspace.parent / "sdk" / self.cid.hex),
            visualizer=None, max_iteration_per_run=10_000, callbacks=[self.on_event],
        )

    def on_event(self, event) -> None:
        """Every few events, while the agent runs (the SDK has persisted the event by now):
        the view and HEAD agree."""
        self.seen += 1
        if self.seen % EVERY == 0:
            self.check(f"mid-run, event {self.seen}", full=False)

    @property
    def state(self) -> ConversationState:
        return self.conversation.state

    def run(self, script: Script, steps: int, text: str) -> None:
        script.left = steps
        self.conversation.send_message(text)
        self.conversation.run()

    def sdk_view(self) -> list[str]:
        return [e.id for e in self.state.view.events]

    def sdk_fold(self) -> list[str]:
        """The SDK's fold over the active branch (``View.from_events(path_to_root(leaf))``, as
        on a cold load). Mid-step, ``state.view`` (extended event by event, not enforced) may
        still hold an action whose observation is not in yet; the fold does not."""
        path = self.state.events.path_to_root(self.state._resolve_active_leaf())
        return [e.id for e in SDKView.from_events(path).events]

    def check(self, label: str, full: bool = True) -> list[str]:
        """Everything this library says about the conversation agrees with the SDK (``full``:
        doctor and the CLI too)."""
        cid = str(self.cid)
        want = self.sdk_fold()
        if full:  # between runs: the SDK's cached view is its fold
            assert self.sdk_view() == want, f"{label}: the SDK's state.view is its fold"
        with EventStore(self.database) as store:
            conv = store.conversation(cid)
            assert [e.id for e in conv.view().events] == want, f"{label}: a fresh store's view"
            # conv.head is the SDK's leaf (None: an empty HEAD)
            leaf = self.state._resolve_active_leaf()
            head = conv.head
            assert (None if head is None else conv.get(head).id) == leaf, f"{label}: HEAD"
            if full:
                report = doctor.check(store, full=True)
                assert report.healthy, (label, report.problems)
        assert [e.id for e in self.fs.conversation.view().events] == want, f"{label}: the file store's cached view"
        leaked = self.abandoned & set(want)
        assert not leaked, f"{label}: the abandoned branch shows: {sorted(leaked)}"
        if not full:
            return want
        shown = invoke("view", self.database, cid[:8], "--json")
        assert shown.exit_code == 0, shown.output
        assert [e["event"]["id"] for e in json.loads(shown.output)["events"]] == want, f"{label}: view --json"
        return want

    def abandon_after(self, event_id: str) -> None:
        """Navigating to ``event_id`` abandons what the current branch holds after it: its
        events, and the summaries its condensations brought."""
        path = [e.id for e in self.state.events.path_to_root(self.state._resolve_active_leaf())]
        for e in self.state.events.path_to_root(self.state._resolve_active_leaf())[path.index(event_id) + 1 :]:
            self.abandoned.add(e.id)
            if isinstance(e, Condensation):
                self.abandoned.add(f"{e.id}-summary")

    def resume(self, label: str) -> None:
        """Close the SDK's conversation and resume it from the database: the same view."""
        before = self.sdk_view()
        self.conversation.close()
        self.fs.close()
        self.open()
        assert self.check(label) == before

    def navigate(self, event_id: str | None, label: str) -> None:
        if event_id is None:
            self.abandoned |= {e.id for e in self.state.view.events}
        else:
            self.abandon_after(event_id)
        self.conversation.navigate_to(event_id)
        self.check(label)


def condensations_on(side: Side) -> list[str]:
    leaf = side.state._resolve_active_leaf()
    return [e.id for e in side.state.events.path_to_root(leaf) if isinstance(e, Condensation)]


@pytest.mark.parametrize("condenser", [ROLLING, None], ids=["rolling-summary", "no-condenser"])
def test_navigate_branch_resume_and_fork_side_by_side_with_the_sdk(database_url, tmp_path, condenser):
    cid = uuid.uuid4()
    script = Script()
    with FakeLLMServer(script) as server:
        side = Side(database_url, cid, server.url, tmp_path / "ws", condenser)

        # The main line.
        side.run(script, 24, "Think the task through, one step at a time.")
        side.check("main line")
        main_condensations = condensations_on(side)
        if condenser:
            assert len(main_condensations) >= 2, "condensations before the rewind"

        # navigate_to an earlier observation: right after the first condensation when there
        # is one (it stays in force; the later ones are abandoned), else the fourth one.
        events = list(side.state.events)
        index = {e.id: k for k, e in enumerate(events)}
        after = index[main_condensations[0]] if main_condensations else 0
        observations = [e for e in events[after:] if isinstance(e, ObservationEvent)]
        target = observations[0 if main_condensations else 3].id
        side.navigate(target, "navigated to an observation")
        assert side.sdk_view()[-1] == target
        side.resume("resumed at the observation")  # HEAD mid-log, nothing appended yet

        # A new branch from there, condensing again.
        side.run(script, 24, "Try another way.")
        side.check("the new branch")
        if condenser:
            assert main_condensations[1:] and set(main_condensations[1:]) <= side.abandoned
            new = [c for c in condensations_on(side) if c not in main_condensations]
            assert new, "condensations after the rewind"
            assert main_condensations[0] in condensations_on(side)
            assert not set(main_condensations[1:]) & set(condensations_on(side))

        # navigate_to the task (a message), and on.
        task = next(e for e in side.state.events if isinstance(e, MessageEvent) and e.source == "user")
        side.navigate(task.id, "navigated to the task")
        side.run(script, 4, "Start again from the task.")
        side.check("a branch from the task")

        # navigate_to(None): an empty HEAD, then a new root.
        side.navigate(None, "an empty HEAD")
        assert side.sdk_view() == []
        side.resume("resumed with an empty HEAD")
        side.run(script, 20, "A new root.")
        side.check("a new root")

        # The SDK resumes from the database: the same view and HEAD, and it goes on.
        side.resume("resumed")
        side.run(script, 6, "Go on.")
        side.check("resumed and run")

        # Fork at an event of the first branch (abandoned) and at HEAD: the SDK's fork shows
        # what this library's fork of the same path shows.
        sdk_events = list(side.state.events)
        for at in (target, sdk_events[-1].id, None):
            fork = side.conversation.fork(from_event_id=at)
            with EventStore(database_url) as store:
                conv = store.conversation(str(cid))
                seq = None if at is None else [e.id for e in sdk_events].index(at)
                ours = conv.fork(at=seq, conversation_id=f"fork-{uuid.uuid4()}")
                assert [e.id for e in ours.view().events] == [e.id for e in fork.state.view.events], at
                head = ours.head
                assert (None if head is None else ours.get(head).id) == fork.state._resolve_active_leaf()
                assert doctor.check(store, full=True).healthy
            fork.close()

        # Exported, the SDK resumes the folder on the same branch.
        with EventStore(database_url) as store:
            export_folder(store.conversation(str(cid)), tmp_path / "exported")
        state_file = json.loads((tmp_path / "exported" / "base_state.json").read_text())
        assert state_file["leaf_event_id"] == side.state._resolve_active_leaf()
        loaded = ConversationState.create(id=cid, agent=side.agent(),
                                          workspace=LocalWorkspace(working_dir=str(tmp_path / "ws")),
                                          persistence_dir=str(tmp_path / "exported"))
        assert [e.id for e in loaded.view.events] == side.sdk_view()
        side.conversation.close()
        side.fs.close()


def test_a_tree_made_here_is_the_sdks_tree_once_exported(database_url, tmp_path):
    """A conversation branched and condensed by this library (``navigate``, appends without
    ``parent_id``, summaries on two branches) exports as a folder the SDK resumes on the same
    branch, and the SDK's fold over every branch's path equals this library's view of it."""
    from openhands_memory.condensers import LLMSummarizingCondenser
    from openhands_memory.events import Condensation as OurCondensation
    from openhands_memory.events import event_from_json

    from .history import steps

    summarizer = LLMSummarizingCondenser(max_size=16, keep_first=2)
    batches = [[event_from_json(e.model_dump_json(exclude_none=True)) for e in b] for b in steps(40)]
    cid = str(uuid.uuid4())
    with EventStore(database_url) as store:
        conv = store.create_conversation(cid)

        def feed(part: list) -> None:
            for batch in part:
                conv.append_many(batch)
                conv.condense(summarizer)

        feed(batches[:18])
        made = [e.seq for e in conv.events() if isinstance(e, OurCondensation)]
        assert len(made) >= 2
        conv.navigate(made[0] + 1)  # after the first summary, before the second
        feed(batches[18:30])
        rewound = conv.head
        conv.navigate(1)  # the task
        feed(batches[30:33])
        conv.navigate(None)
        feed(batches[33:41])
        conv.navigate(rewound)
        leaves = [b.leaf for b in conv.branches()]
        assert len(leaves) == 4
        ours = {leaf: [e.id for e in conv.view(at=leaf).events] for leaf in leaves}
        uids = [e.id for e in conv.events()]
        head_view = [e.id for e in conv.view().events]
        export_folder(conv, tmp_path / "exported")

    state_file = json.loads((tmp_path / "exported" / "base_state.json").read_text())
    loaded = ConversationState.create(id=uuid.UUID(state_file["id"]), agent=None,
                                      workspace=LocalWorkspace(working_dir=str(tmp_path)),
                                      persistence_dir=str(tmp_path / "exported"))
    assert loaded._resolve_active_leaf() == uids[rewound]
    assert [e.id for e in loaded.view.events] == head_view
    for leaf in leaves:
        sdk_view = SDKView.from_events(loaded.events.path_to_root(uids[leaf]))
        assert [e.id for e in sdk_view.events] == ours[leaf], leaf


def test_base_state_moves_head_in_the_same_transaction_and_every_cache_sees_it(database_url):
    """The file store sets HEAD from each base_state.json the SDK writes; another connection's
    cached view (which learns of others' writes by the conversation's version) reads again;
    deleting base_state.json leaves HEAD where it is."""
    from openhands.sdk.conversation.event_store import EventLog
    from openhands.sdk.llm import Message, TextContent

    cid = uuid.uuid4()
    fs = DatabaseFileStore(database_url, cid)
    fs.write("base_state.json", json.dumps({"id": str(cid)}))
    log = EventLog(fs)
    events = [MessageEvent(source="user", llm_message=Message(role="user", content=[TextContent(text=f"m{i}")]))
              for i in range(5)]
    for e in events:
        log.append(e)
    ids = [e.id for e in events]

    def state(leaf: str | None, empty: bool = False) -> str:
        return json.dumps({"id": str(cid), "leaf_event_id": leaf, "head_is_empty": empty})

    with EventStore(database_url) as other:
        watcher = other.conversation(str(cid))
        assert [e.id for e in watcher.view().events] == ids  # cached from here on
        assert [e.id for e in fs.conversation.view().events] == ids
        fs.write("base_state.json", state(ids[2]))
        assert fs.conversation.head == 2
        assert [e.id for e in watcher.view().events] == ids[:3]
        assert [e.id for e in fs.conversation.view().events] == ids[:3]
        fs.delete("base_state.json")
        assert watcher.head == 2 and [e.id for e in watcher.view().events] == ids[:3]
        fs.write("base_state.json", state(str(uuid.uuid4())))  # names no event (yet): nothing moves
        assert watcher.head == 2
        fs.write("base_state.json", state(None, empty=True))
        assert watcher.head is None and watcher.view().events == []
        assert fs.conversation.view().events == []
        fs.write("base_state.json", state(ids[4]))
        assert watcher.head == 4 and [e.id for e in watcher.view().events] == ids
        assert doctor.check(other, full=True).healthy
    fs.close()
