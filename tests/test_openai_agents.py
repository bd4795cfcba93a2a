"""MemorySession under the real OpenAI Agents SDK (pinned in the test extra), on both backends.

The SDK's ``Runner`` talks to the suite's OpenAI-compatible server on 127.0.0.1 (its Chat
Completions model, and its default Responses model), with a tool, through ``MemorySession``,
over enough runs that a condensation happens; the request the model receives next is the
condensed view, every tool call answered. The SDK ships no session tests of its own (its
repository's ``tests/memory/test_session.py`` is written against ``SQLiteSession`` and the
repository's private test helpers): the behaviours it checks of a session are checked here
of ``MemorySession``, through the SDK's public API.

Without the package these tests skip, or fail under ``OHM_REQUIRE_OPENAI_AGENTS=1`` (CI).
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from typing import Any

import pytest

from openhands_memory.conversation import EventStore
from openhands_memory.inspection import doctor

from .chat_items import provider_problems

try:
    import agents
    from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, SessionSettings, function_tool
    from openai import AsyncOpenAI
except ImportError as e:  # pragma: no cover - depends on the environment
    if os.environ.get("OHM_REQUIRE_OPENAI_AGENTS") == "1":
        raise ImportError(f"OHM_REQUIRE_OPENAI_AGENTS=1 and the OpenAI Agents SDK is missing: {e}") from e
    pytest.skip(f"the OpenAI Agents SDK is not installed ({e}); pip install '.[test]'", allow_module_level=True)

from openhands_memory.integrations.openai_agents import MemorySession

agents.set_tracing_disabled(True)  # its exporter would reach for the network


@function_tool
def terminal(command: str) -> str:
    """Run a shell command and return its output."""
    return f"$ {command}\n" + "E   KeyError: 'frobnicate'\n" * 12 + "1 failed, 4 passed"


def chat_agent(server: Any) -> Agent:
    client = AsyncOpenAI(base_url=server.url, api_key="sk-test", max_retries=0)
    return Agent(name="fixer", instructions="You fix failing tests.", tools=[terminal],
                 model=OpenAIChatCompletionsModel(model="test-model", openai_client=client))


def responses_agent(server: Any) -> Agent:
    client = AsyncOpenAI(base_url=server.url, api_key="sk-test", max_retries=0)
    return Agent(name="fixer", instructions="You fix failing tests.", tools=[terminal],
                 model=OpenAIResponsesModel(model="test-model", openai_client=client))


def session_id() -> str:
    return f"agents-{uuid.uuid4().hex[:10]}"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def one_run(agent: Agent, server: Any, session: MemorySession, turn: int) -> Any:
    server.push_tool_call("terminal", {"command": f"pytest -k case_{turn}"})
    server.push_text(f"Run {turn}: case_{turn} still fails on frobnicate.")
    return await Runner.run(agent, f"Look at case_{turn}", session=session)


# --- condensation, seen by the model ---------------------------------------------------------


def test_runner_condenses_and_the_model_receives_the_condensed_view(database_url, llm_server):
    session = MemorySession(session_id(), database_url, condenser={"type": "llm", "max_size": 12, "keep_first": 1})
    agent = chat_agent(llm_server)

    async def go() -> None:
        condensed_at = None
        for turn in range(8):
            before = await session.get_items()
            first_request = len(llm_server.requests)
            result = await one_run(agent, llm_server, session, turn)
            assert result.final_output == f"Run {turn}: case_{turn} still fails on frobnicate."
            sent = llm_server.requests[first_request]["messages"]
            assert provider_problems(sent) == [], sent
            # what the run began with: the instructions, the session's items, the new input
            assert sent[0] == {"role": "system", "content": "You fix failing tests."}
            assert sent[-1] == {"role": "user", "content": f"Look at case_{turn}"}
            assert len(sent) == len(before) + 2
            if condensed_at is not None:
                assert any("digest" in str(m.get("content")) for m in sent)  # the summary, not the history
            if condensed_at is None and session.history.conversation.view().last_condensation is not None:
                condensed_at = turn
        assert condensed_at is not None and condensed_at < 7
        items = await session.get_items()
        assert len(items) <= 12
        assert len(session.history.conversation) > 8 * 4  # nothing deleted: every item is still stored
        hits = session.history.search("case_0")
        assert hits and all(h.hidden_by is not None for h in hits)

    run(go())
    session.close()
    with EventStore(database_url) as store:
        assert doctor.check(store, full=True).healthy


def test_the_sdk_calls_run_compaction_after_a_responses_model_turn(database_url, llm_server):
    """With ``compaction="run_compaction"``, add_items never condenses: the condensation is
    the SDK's own call of ``run_compaction`` (found by name, as it looks for it)."""
    session = MemorySession(session_id(), database_url, condenser={"type": "llm", "max_size": 10, "keep_first": 1},
                            compaction="run_compaction")
    agent = responses_agent(llm_server)
    calls: list[Any] = []
    original = session.run_compaction

    async def spying(args: Any = None) -> None:
        calls.append(args)
        await original(args)

    session.run_compaction = spying  # type: ignore[method-assign]

    async def go() -> None:
        for turn in range(5):
            await one_run(agent, llm_server, session, turn)
        assert calls and all(a["response_id"].startswith("resp_") for a in calls)
        assert session.history.conversation.view().last_condensation is not None
        first_request = len(llm_server.requests)
        await one_run(agent, llm_server, session, 5)
        sent = llm_server.requests[first_request]["input"]
        assert any("digest" in json.dumps(item) for item in sent)
        outputs = {i["call_id"] for i in sent if i.get("type") == "function_call_output"}
        assert outputs == {i["call_id"] for i in sent if i.get("type") == "function_call"}

    run(go())
    session.close()


def test_run_compaction_forced_and_the_add_items_default(tmp_path):
    async def go() -> None:
        manual = MemorySession("manual", tmp_path / "a.db", condenser={"type": "llm", "max_size": 100, "keep_first": 1},
                               compaction="run_compaction")
        await manual.add_items([{"role": "user", "content": f"message {i}"} for i in range(6)])
        await manual.run_compaction({"force": False})
        assert len(await manual.get_items()) == 6  # nothing asked it to condense
        await manual.run_compaction({"force": True})
        items = await manual.get_items()
        assert len(items) < 6 and "digest" in items[1]["content"]
        manual.close()
        none = MemorySession("plain", tmp_path / "a.db")
        await none.run_compaction({"force": True})  # no condenser: nothing to do
        await none.add_items([{"role": "user", "content": "x"}])
        assert await none.get_items() == [{"role": "user", "content": "x"}]
        none.close()

    run(go())


def test_the_summarizer_is_a_model_through_litellm_and_its_calls_are_in_the_ledger(tmp_path, llm_server):
    """Condensation with any model: the summarizer asks a second server (through litellm),
    the summary it writes is what the agent's model receives next, the calls are ledger rows."""
    from openhands_memory.inspection.summary import stats

    from .llm_server import FakeLLMServer

    with FakeLLMServer(lambda body: "NOTE: case_0 to case_2 fail on frobnicate in dates.py") as summarizer:
        condenser = {"type": "llm", "max_size": 12, "keep_first": 1,
                     "llm_config": {"model": "openai/summarizer", "api_base": summarizer.url, "api_key": "sk-test"}}
        session = MemorySession("run", tmp_path / "a.db", condenser=condenser)
        agent = chat_agent(llm_server)

        async def go() -> None:
            for turn in range(5):
                await one_run(agent, llm_server, session, turn)

        run(go())
        assert summarizer.requests and summarizer.requests[0]["model"] == "summarizer"
        last = llm_server.requests[-2]["messages"]  # the last run's first request
        assert {"content": "NOTE: case_0 to case_2 fail on frobnicate in dates.py", "role": "user"} in last
        assert provider_problems(last) == []
        ledger = stats(session.history.store).llm_calls
        assert ledger["calls"] == len(summarizer.requests)
        assert ledger["by_model"][0]["model"] == "openai/summarizer" and ledger["by_model"][0]["outcomes"] == {"ok": ledger["calls"]}
        session.close()


# --- the behaviours the SDK's own session tests check -----------------------------------------


def test_runner_remembers_and_sessions_stay_apart(database_url, llm_server):
    agent = chat_agent(llm_server)
    first, second = MemorySession(session_id(), database_url), MemorySession(session_id(), database_url)

    async def go() -> None:
        llm_server.push_text("San Francisco")
        assert (await Runner.run(agent, "Which city is the Golden Gate Bridge in?", session=first)).final_output \
            == "San Francisco"
        llm_server.push_text("I like dogs")
        await Runner.run(agent, "I like dogs", session=second)
        llm_server.push_text("California")
        assert (await Runner.run(agent, "Which state is it in?", session=first)).final_output == "California"
        last = llm_server.requests[-1]["messages"]
        assert [m["content"] for m in last[1:]] == ["Which city is the Golden Gate Bridge in?", "San Francisco",
                                                    "Which state is it in?"]
        assert len(await second.get_items()) == 2

    run(go())
    first.close()
    second.close()


def test_items_limit_pop_and_clear(database_url):
    async def go() -> None:
        session = MemorySession(session_id(), database_url, session_settings={"limit": 4})
        assert isinstance(session.session_settings, SessionSettings)
        assert await session.pop_item() is None
        items = [{"role": "user", "content": "Message 1"}, {"role": "assistant", "content": "Response 1"},
                 {"role": "user", "content": "Message 2"},
                 {"type": "function_call", "call_id": "c1", "name": "terminal", "arguments": "{}"},
                 {"type": "function_call", "call_id": "c2", "name": "terminal", "arguments": "{}"},
                 {"type": "function_call_output", "call_id": "c1", "output": "ok"},
                 {"type": "function_call_output", "call_id": "c2", "output": "ok"},
                 {"role": "assistant", "content": "Response 3"}]
        await session.add_items(items)
        assert await session.get_items(limit=100) == items
        assert await session.get_items(limit=0) == []
        assert await session.get_items(limit=1) == items[-1:]
        # the settings' limit (4) would start at c2's call and leave c1's output without its call
        assert await session.get_items() == items[3:]
        assert await session.get_items(limit=2) == items[3:]
        assert await session.pop_item() == items[-1]
        assert await session.pop_item() == items[-2]
        assert [e.item for e in session.history.entries()] == items[:6]
        # c2 has no output now: the batch of calls waits for it, out of what is sent
        assert await session.get_items(limit=100) == items[:3]
        await session.clear_session()
        assert await session.get_items(limit=100) == [] and await session.pop_item() is None
        await session.add_items([{"role": "user", "content": "fresh start"}])
        assert await session.get_items() == [{"role": "user", "content": "fresh start"}]
        # nothing was deleted: the branch left behind is readable
        assert len(session.history.branches()) == 2
        old = session.history.conversation.view(at=7)
        assert [e.kind for e in old][-2:] == ["ObservationEvent", "MessageEvent"]
        session.close()

    run(go())


def test_a_fork_is_a_session_of_its_own(tmp_path):
    async def go() -> None:
        session = MemorySession("main", tmp_path / "a.db")
        await session.add_items([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                 {"role": "user", "content": "c"}])
        fork = session.fork(at=1, session_id="retry")
        assert fork.session_id == "retry"
        assert await fork.get_items() == [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
        await fork.add_items([{"role": "user", "content": "d"}])
        assert len(await session.get_items()) == 3 and len(await fork.get_items()) == 3
        fork.close()
        session.close()

    run(go())
