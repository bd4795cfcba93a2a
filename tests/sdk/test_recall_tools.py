"""recall_search and recall_read as tools of a real SDK agent, on SQLite and on PostgreSQL.

The scripted model runs a test that fails with a distinctive error, thinks long enough for
SDKCondenser to condense the failure away, then searches for the error, reads the event
back, and tries to reach another conversation's rows. Each tool result is read where it
matters: in the next request the model receives."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from typing import Any, ClassVar, Self

import pytest
from openhands.sdk import LLM, Agent, LocalConversation, Tool
from openhands.sdk.conversation.state import ConversationExecutionStatus
from openhands.sdk.tool import Action, Observation, ToolDefinition, ToolExecutor, register_tool
from pydantic import Field, SecretStr

from openhands_memory.conversation import EventStore
from openhands_memory.events import ObservationEvent
from openhands_memory.integrations.openhands_sdk import (
    RECALL_PROMPT,
    DatabaseFileStore,
    RecallSearchTool,
    SDKCondenser,
    recall_agent_tools,
)
from tests import factories as f
from tests.llm_server import FakeLLMServer, Reply

from .agent import CONDENSER_TOML

ERROR = "KeyError: 'frobnicate_widget'"
OTHERS = "ZeroDivisionError: zorblax_gadget"  # only in another conversation of the database
SEARCH_AT = 34  # the request at which the model searches (the failure is condensed away by then)


# --- a stand-in for a shell: the first test run fails with ERROR ---------------------------


class StubShellAction(Action):
    command: str = Field(description="The command to run.")


class StubShellObservation(Observation):
    pass


class StubShellExecutor(ToolExecutor):
    def __call__(self, action: StubShellAction, conversation=None) -> StubShellObservation:
        return StubShellObservation.from_text(
            f"$ {action.command}\nTraceback (most recent call last):\n  File \"src/widgets.py\", line 7, in load\n{ERROR}"
        )


class StubShellTool(ToolDefinition[StubShellAction, StubShellObservation]):
    user_selectable: ClassVar[bool] = False

    @classmethod
    def create(cls, conv_state=None, **params) -> Sequence[Self]:
        return [cls(description="Run a shell command.", action_type=StubShellAction,
                    observation_type=StubShellObservation, executor=StubShellExecutor())]


register_tool(StubShellTool.name, StubShellTool)


# --- the scripted model -----------------------------------------------------------------


def call(name: str, **arguments: Any) -> Reply:
    return Reply("tool_call", tool_calls=[(name, json.dumps(arguments))])


def text(message: dict) -> str:
    content = message["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [])


def tool_results(body: dict) -> list[str]:
    """The text of each tool result in a request, in order."""
    return [text(m) for m in body["messages"] if m["role"] == "tool"]


def scripted_model(other_id: int) -> FakeLLMServer:
    def respond(body: dict) -> Reply:
        n = len(server.requests)
        if n == 1:
            return call(StubShellTool.name, command="pytest tests/test_widgets.py")
        if n < SEARCH_AT:
            return call("think", thought=f"step {n}: reading the widget loader")
        if n == SEARCH_AT:
            return call("recall_search", query="frobnicate_widget")
        if n == SEARCH_AT + 1:
            found = re.search(r"\[event (\d+)\]", tool_results(body)[-1])
            return call("recall_read", event_id=int(found.group(1)) if found else 0)
        if n == SEARCH_AT + 2:  # an id only the other conversation has
            return call("recall_read", event_id=other_id)
        if n == SEARCH_AT + 3:  # text only the other conversation has
            return call("recall_search", query="zorblax_gadget", scope="all")
        if n == SEARCH_AT + 4:
            return call("recall_search", query="frobnicate_widget", scope="everything")
        return call("finish", message="fixed the widget loader")

    server = FakeLLMServer(respond)
    return server


def other_conversation(database: str) -> int:
    """A longer conversation in the same database, holding ERROR and OTHERS; the id of its
    last event (more than the agent's conversation will have)."""
    with EventStore(database) as store:
        conv = store.create_conversation(str(uuid.uuid4()))
        conv.append_many([f.system(), f.user("another task")])
        for i in range(150):
            text = f"{OTHERS}\n{ERROR}" if i in (3, 140) else f"ran {i}"
            conv.append_many([f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}", text)])
        return len(conv) - 1


def open_agent(database: str, cid: uuid.UUID, llm_url: str, workspace) -> LocalConversation:
    llm = LLM(model="openai/test-model", base_url=llm_url, api_key=SecretStr("test-key"), usage_id="agent",
              num_retries=0)
    agent = Agent(llm=llm, tools=[Tool(name=StubShellTool.name), *recall_agent_tools()],
                  condenser=SDKCondenser.from_toml(CONDENSER_TOML))
    return LocalConversation(agent=agent, workspace=str(workspace), conversation_id=cid,
                             file_store=DatabaseFileStore(database, cid), visualizer=None,
                             max_iteration_per_run=1_000)


def test_the_agent_recalls_a_condensed_error_and_reads_it_back(database_url, tmp_path):
    other_id = other_conversation(database_url)
    cid = uuid.uuid4()
    with scripted_model(other_id) as server:
        conversation = open_agent(database_url, cid, server.url, tmp_path / "ws")
        conversation.send_message("The widget tests fail: find out why.")
        conversation.run()
        state = conversation.state
        assert state.execution_status == ConversationExecutionStatus.FINISHED
        requests = server.requests
        assert len(requests) == SEARCH_AT + 5

    # The model is offered both tools, and the system prompt says how to use them.
    offered = [t["function"]["name"] for t in requests[0]["tools"]]
    assert "recall_search" in offered and "recall_read" in offered
    assert RECALL_PROMPT in text(requests[0]["messages"][0])

    with EventStore(database_url) as store:
        conv = store.conversation(str(cid))
        failed = next(e.seq for e in conv if isinstance(e, ObservationEvent) and e.tool_name == StubShellTool.name)
        assert failed not in conv.view().seqs
        assert other_id >= len(conv) - 1 + 20, "the other conversation's last id is not one of ours"

    # Before the search, the failure's own result is condensed out of what the model sees.
    before = requests[SEARCH_AT - 1]
    assert not any("frobnicate_widget" in r for r in tool_results(before))

    # recall_search's result reaches the model: the failure, tagged by its id, hidden.
    found = tool_results(requests[SEARCH_AT])[-1]
    assert f"[event {failed}] ObservationEvent {StubShellTool.name} " in found
    assert "hidden by #" in found and "frobnicate_widget" in found
    assert "recall_read" in found.splitlines()[-1]
    assert len(found) <= 4000

    # recall_read's result reaches the model: the event's text, its call, its neighbours.
    read = tool_results(requests[SEARCH_AT + 1])[-1]
    assert read.startswith(f"[event {failed}] ObservationEvent")
    assert ERROR in read and "pytest tests/test_widgets.py" in read
    assert f"its tool call: event {failed - 1}" in read
    assert "hidden from your context" in read

    # Never another conversation's rows: its ids are unknown here, its text is not found.
    elsewhere = tool_results(requests[SEARCH_AT + 2])[-1]
    assert f"Error: there is no event {other_id} in this conversation" in elsewhere
    assert "An error occurred" in elsewhere  # sent as an observation with is_error
    assert ERROR not in elsewhere
    nowhere = tool_results(requests[SEARCH_AT + 3])[-1]
    assert nowhere.startswith("No event matches 'zorblax_gadget'") and "[event" not in nowhere

    # A bad argument is an error the model reads, not the end of the agent.
    bad = tool_results(requests[SEARCH_AT + 4])[-1]
    assert "An error occurred" in bad and "scope must be one of forgotten, visible, all" in bad

    # The observations are stored as the SDK's events, with is_error where it was one.
    recalls = [e for e in state.events if getattr(e, "tool_name", None) in ("recall_search", "recall_read")
               and type(e).__name__ == "ObservationEvent"]
    assert [e.observation.is_error for e in recalls] == [False, False, True, False, True]
    with EventStore(database_url) as store:
        assert [e.id for e in store.conversation(str(cid)).view().events] == [e.id for e in state.view.events]
    conversation.close()


def test_a_recall_tool_needs_a_database(database_url, tmp_path):
    """Persisted elsewhere, with no database named: the tool says how to give it one."""
    from openhands.sdk.conversation.state import ConversationState
    from openhands.sdk.workspace import LocalWorkspace

    llm = LLM(model="openai/test-model", base_url="http://127.0.0.1:9", api_key=SecretStr("k"), usage_id="a")
    state = ConversationState.create(id=uuid.uuid4(), agent=Agent(llm=llm, tools=[]),
                                     workspace=LocalWorkspace(working_dir=str(tmp_path)))
    with pytest.raises(ValueError, match="DatabaseFileStore"):
        RecallSearchTool.create(state)
    with pytest.raises(ValueError, match="only the parameter"):
        RecallSearchTool.create(state, path="x.db")

    # Naming the database: the conversation is still the state's own.
    database = database_url
    with EventStore(database) as store:
        conv = store.create_conversation(str(state.id))
        conv.append_many([f.system(), f.user(f"remember {ERROR}")])
        store.create_conversation("someone-else").append(f.user(OTHERS))
    (tool,) = RecallSearchTool.create(state, database=database)
    try:
        from openhands_memory.integrations.openhands_sdk import RecallSearchAction

        got = tool(RecallSearchAction(query="frobnicate_widget", scope="all"))
        assert not got.is_error and "[event 1] MessageEvent" in got.text
        assert "No event matches" in tool(RecallSearchAction(query="zorblax_gadget", scope="all")).text
    finally:
        tool.executor.close()


# --- whatever the model sends: the SDK's own check, then the tool's ----------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from pydantic import ValidationError  # noqa: E402

from openhands_memory.conversation import Conversation  # noqa: E402
from openhands_memory.integrations.openhands_sdk.recall_tools import (  # noqa: E402
    RecallExecutor,
    RecallReadAction,
    RecallSearchAction,
)

EDGES = [2**63, 2**64, -(2**63) - 1, 2**62, 10**300, 1e300, -1e300, float("nan"), float("inf"), 0.5, True, None,
         "", "1e3", "9" * 5000, "x\ud800", "\udcff", "a\x00b", " ".join(["w"] * 1000), "é" * 100_000, [], {}]
VALUES = st.one_of(st.sampled_from(EDGES), st.integers(), st.floats(), st.text(max_size=30))
ACTIONS = {"recall_search": RecallSearchAction, "recall_read": RecallReadAction}


@pytest.fixture
def recalled(database_url):
    with EventStore(database_url) as store:
        conv = store.create_conversation("mine")
        conv.append_many([f.system(), f.user("the widget tests fail")])
        for i in range(30):
            text = ERROR if i == 3 else f"ran {i}"
            conv.append_many([f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}", text)])
        yield Conversation(store, "mine")


@pytest.mark.parametrize("name", ["recall_search", "recall_read"])
def test_any_arguments_the_sdk_lets_through_come_back_as_observations(recalled, name):
    """The SDK checks the arguments' types (an int may be 2^63, a float 1e300 is an int to
    pydantic, a str may hold a lone surrogate, NUL, 100,000 characters); what passes reaches
    the executor, which answers with an observation, an error one where it must, and never
    raises (it once hid an OverflowError behind a catch-all)."""
    executor = RecallExecutor(name, recalled)
    required = "query" if name == "recall_search" else "event_id"
    optional = sorted(set(ACTIONS[name].model_fields) - {"kind", required})
    reached = []

    @settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(arguments=st.fixed_dictionaries({required: VALUES}, optional={k: VALUES for k in optional}))
    def run(arguments):
        try:
            action = ACTIONS[name].model_validate(arguments)  # what Agent does with a tool call
        except ValidationError:
            return  # the SDK tells the model itself, before any tool runs
        reached.append(arguments)
        observation = executor(action)
        text = observation.text
        text.encode("utf-8")
        assert text.startswith("Error: ") == observation.is_error, text[:300]

    run()
    assert reached  # some got past the SDK's check, so the executor was tried


@pytest.mark.parametrize("name, arguments, says", [
    ("recall_read", {"event_id": 2**63}, "Error: there is no event 9223372036854775808 in this conversation"),
    ("recall_read", {"event_id": 9.2e18}, "Error: there is no event 9200000000000000000 in this conversation"),
    ("recall_search", {"query": "x\ud800"}, "Error: query holds a lone surrogate (U+D800 at character 1)"),
    ("recall_search", {"query": "é" * 100_000}, "Error: query is 100,000 characters long; give at most 1,000"),
])
def test_what_once_raised_is_an_error_observation(recalled, name, arguments, says):
    observation = RecallExecutor(name, recalled)(ACTIONS[name].model_validate(arguments))
    assert observation.is_error and observation.text.startswith(says), observation.text


def test_unknown_arguments_are_refused_by_the_sdk_before_the_tool(recalled):
    """The SDK's actions forbid extra fields: a conversation_id the model invents is an error
    the SDK sends back; no tool of another conversation is ever run."""
    with pytest.raises(ValidationError, match="conversation_id"):
        RecallSearchAction.model_validate({"query": "x", "conversation_id": "someone-else"})


def test_a_damaged_database_is_an_error_observation_naming_it(tmp_path):
    path = tmp_path / "damaged.db"
    with EventStore(path) as store:
        conv = store.create_conversation("mine")
        conv.append_many([f.system(), f.user("the widget tests fail")])
        for i in range(40):
            conv.append_many([f.action(f"r{i}", f"c{i}"), f.observation(f"c{i}", ERROR if i == 3 else f"ran {i}")])
    with EventStore(path, readonly=True) as store:
        executor = RecallExecutor("recall_search", Conversation(store, "mine"))
        size = path.stat().st_size
        with open(path, "r+b") as out:  # every page past the schema's, under the open store
            out.seek(8192)
            out.write(b"\xff" * (size - 8192))
        observation = executor(RecallSearchAction(query="frobnicate_widget", scope="all"))
        assert observation.is_error
        assert observation.text == ("Error: recall_search failed: the database: DatabaseError: database disk image "
                                    "is malformed")
