"""SDKCondenser runs each of this library's strategies inside the SDK's condenser protocol.

Each case replays SDK events (made with the SDK's classes) step by step as an agent does:
append the step's events through DatabaseFileStore, ask the condenser with the SDK's view,
store a Condensation it returns. At every step the SDK's view of the log must equal this
library's view of the rows, id for id. The LLM strategies call the suite's loopback server
through litellm's real HTTP path."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from openhands.sdk import LLM, Agent
from openhands.sdk.agent.base import AgentBase
from openhands.sdk.context.view import View as SDKView
from openhands.sdk.conversation.event_store import EventLog
from openhands.sdk.event import Condensation as SDKCondensation
from openhands.sdk.event import ObservationEvent
from pydantic import SecretStr

from openhands_memory.errors import ConfigError
from openhands_memory.inspection import doctor
from openhands_memory.inspection.history import history
from openhands_memory.integrations.openhands_sdk import DatabaseFileStore, SDKCondenser
from tests.llm_server import FakeLLMServer, Reply, text_reply

from .history import steps

STATE_FIELDS = ["user_context", "completed_tasks", "pending_tasks", "current_state"]

ROLLING = {
    "llm (offline summarizer)": 'type = "llm"\nmax_size = 24\nkeep_first = 2',
    "llm (token trigger)": 'type = "llm"\nmax_size = 1000\nkeep_first = 2\nmax_tokens = 2500\ntokenizer = "chars/4"',
    "amortized": 'type = "amortized"\nmax_size = 24\nkeep_first = 2',
    "conversation_window (on request)": 'type = "conversation_window"',
    "pipeline": '[[condenser.condensers]]\ntype = "observation_masking"\nattention_window = 6\n'
                '[[condenser.condensers]]\ntype = "llm"\nmax_size = 24\nkeep_first = 2',
}
LLM_ROLLING = {
    "llm (loopback model)": 'type = "llm"\nmax_size = 24\nkeep_first = 2\nllm_config = "summarizer"',
    "structured": 'type = "structured"\nmax_size = 24\nkeep_first = 2\nllm_config = "summarizer"',
    "llm_attention": 'type = "llm_attention"\nmax_size = 24\nkeep_first = 2\nllm_config = "summarizer"',
}


def toml(body: str, llm_url: str | None = None) -> str:
    head = "[condenser]\n" if not body.startswith("[[") else '[condenser]\ntype = "pipeline"\n'
    llm = f'\n[llm.summarizer]\nmodel = "openai/test-model"\nbase_url = "{llm_url}"\napi_key = "k"\n' if llm_url else ""
    return head + body + "\n" + llm


def summarizer_replies(body: dict) -> Reply:
    """What a model answers each strategy: a state summary, a ranking, or a summary."""
    tools = [t["function"]["name"] for t in body.get("tools") or []]
    if "create_state_summary" in tools:
        return Reply("tool_call", tool_calls=[("create_state_summary", json.dumps({f: f"{f} so far" for f in STATE_FIELDS}))])
    prompt = json.dumps(body["messages"])
    listed = [int(i) for i in re.findall(r"<event id=(\d+)>", prompt)]
    if listed:
        return text_reply(json.dumps({"ids": listed[-8:]}))
    return text_reply("Summary: the agent thought through the bug and read the docs.")


def replay(condenser: SDKCondenser, database: str, n_steps: int, *, request_at: int | None = None):
    """Feed ``n_steps`` steps; returns (the store, condensations stored, the last view sent)."""
    fs = DatabaseFileStore(database, uuid.uuid4())
    fs.write("base_state.json", "{}")
    log = EventLog(fs)
    condensations, sent = 0, None
    for k, batch in enumerate(steps(n_steps)):
        for e in batch:
            log.append(e)
        if k == request_at:
            from openhands.sdk.event import CondensationRequest

            log.append(CondensationRequest())
        result = condenser.condense(SDKView.from_events(list(log)))
        if isinstance(result, SDKCondensation):
            log.append(result)
            condensations += 1
        else:
            sent = result
        ours = fs.conversation.view()
        assert [e.id for e in SDKView.from_events(list(log)).events] == [e.id for e in ours.events], f"step {k}"
    assert doctor.check(fs.store, full=True).healthy
    return fs, condensations, sent


@pytest.mark.parametrize("name", list(ROLLING))
def test_rolling_strategies_condense_as_the_sdk_sees_it(name, tmp_path):
    request_at = 30 if "request" in name else None
    condenser = SDKCondenser.from_toml(toml(ROLLING[name]))
    _, condensations, _ = replay(condenser, str(tmp_path / "rolling.db"), 60, request_at=request_at)
    assert condensations >= (1 if request_at else 3)


def test_a_rolling_summary_condenses_as_the_sdk_sees_it_on_both_backends(database_url):
    _, condensations, _ = replay(SDKCondenser.from_toml(toml(ROLLING["pipeline"])), database_url, 60)
    assert condensations >= 3


@pytest.mark.parametrize("name", list(LLM_ROLLING))
def test_llm_strategies_call_the_model_and_condense(name, tmp_path):
    with FakeLLMServer(summarizer_replies) as server:
        condenser = SDKCondenser.from_toml(toml(LLM_ROLLING[name], server.url))
        fs, condensations, _ = replay(condenser, str(tmp_path / "llm.db"), 45)
        assert condensations >= 2
        assert len(server.requests) == condensations
    # Why each was made, and the calls behind it, are stored with it (history, the ledger).
    made = [r.condensation for r in history(fs.store, fs.conversation_id) if r.condensation]
    assert [m["strategy"] for m in made] == [condenser.strategy.type] * condensations
    assert all(m["reason"] for m in made)
    with fs.store.reading() as db:
        (totals,) = db.llm_call_totals([fs.conversation_id])
    assert totals[:4] == ("openai/test-model", condenser.strategy.purpose, "ok", condensations)


def test_masking_rewrites_what_is_sent_and_keeps_the_sdk_objects(tmp_path):
    condenser = SDKCondenser.from_toml(toml('type = "observation_masking"\nattention_window = 4'))
    _, condensations, sent = replay(condenser, str(tmp_path / "mask.db"), 20)
    assert condensations == 0
    observations = [e for e in sent.events if isinstance(e, ObservationEvent)]
    masked = [e for e in observations if "<MASKED>" in e.model_dump_json()]
    assert masked and len(masked) < len(observations)
    kept = [e for e in sent.events if e not in masked]
    assert all(type(e).__module__.startswith("openhands.sdk") for e in sent.events)
    assert len(kept) > 4


def test_recent_events_sends_the_head_and_the_newest(tmp_path):
    condenser = SDKCondenser.from_toml(toml('type = "recent"\nkeep_first = 2\nmax_events = 20'))
    _, condensations, sent = replay(condenser, str(tmp_path / "recent.db"), 30)
    assert condensations == 0 and len(sent.events) == 20
    assert type(sent.events[0]).__name__ == "SystemPromptEvent"


def test_browser_masking_keeps_only_the_newest_page(tmp_path):
    condenser = SDKCondenser.from_toml(toml('type = "browser_output_masking"\nattention_window = 1'))
    _, _, sent = replay(condenser, str(tmp_path / "browser.db"), 20)
    pages = [e for e in sent.events if isinstance(e, ObservationEvent) and e.tool_name == "browser_navigate"]
    full = [e for e in pages if "text text" in e.model_dump_json()]
    assert len(pages) == 4 and len(full) == 1 and full[0] is pages[-1]


@pytest.mark.parametrize("body", [*ROLLING.values(), *LLM_ROLLING.values()])
def test_an_agent_saves_and_loads_it_without_the_api_key(body):
    condenser = SDKCondenser.from_toml(toml(body, "http://127.0.0.1:9/v1"))
    llm = LLM(model="openai/test-model", api_key=SecretStr("k"), usage_id="agent")
    saved = Agent(llm=llm, tools=[], condenser=condenser).model_dump_json()
    assert "api_key" not in json.dumps(json.loads(saved)["condenser"])  # keys stay out of base_state.json
    loaded = AgentBase.model_validate_json(saved)
    assert isinstance(loaded.condenser, SDKCondenser)
    assert loaded.condenser.settings == condenser.settings
    assert loaded.condenser.strategy.config() == condenser.strategy.config()


def test_bad_toml_is_one_clear_error():
    with pytest.raises(ConfigError, match="condenser.max_size"):
        SDKCondenser.from_toml('[condenser]\ntype = "llm"\nmax_size = "many"\n')
    with pytest.raises(ConfigError, match="not valid TOML"):
        SDKCondenser.from_toml("[condenser\n")


PINNED = '''type = "llm"
max_size = 24
keep_first = 1

[[condenser.pins]]
first_user_message = true

[[condenser.pins]]
tool = "browser_navigate"
mode = "keep"
'''


def test_keep_pin_rules_survive_condensations_and_the_sdk_agrees(tmp_path):
    """The SDK's view of its own log equals ours at every step (``replay``), and the rules'
    events are in it: the task, and the newest browser page with its call."""
    condenser = SDKCondenser.from_toml("[condenser]\n" + PINNED)
    fs, condensations, _ = replay(condenser, str(tmp_path / "pinned.db"), 60)
    assert condensations >= 3
    view = fs.conversation.view()
    kinds = [(e.kind, getattr(e, "tool_name", None)) for e in view.events]
    assert ("MessageEvent", None) in kinds  # "Fix the bug." is never forgotten
    assert ("ObservationEvent", "browser_navigate") in kinds and ("ActionEvent", "browser_navigate") in kinds
    # the rules travel with the condenser the SDK saves in base_state.json
    again = SDKCondenser.model_validate_json(condenser.model_dump_json())
    assert again.strategy.pin_rules == condenser.strategy.pin_rules


def test_a_reinject_rule_shows_the_forgotten_task_once_after_the_summary(tmp_path):
    condenser = SDKCondenser.from_toml(
        '[condenser]\ntype = "llm"\nmax_size = 24\nkeep_first = 1\n'
        '[[condenser.pins]]\nfirst_user_message = true\nmode = "reinject"\n'
    )
    fs, condensations, sent = replay(condenser, str(tmp_path / "reinject.db"), 41)
    assert condensations >= 2 and sent is not None
    users = [e for e in sent.events if getattr(e, "source", None) == "user" and hasattr(e, "llm_message")]
    assert [e.llm_message.content[0].text for e in users] == [users[0].llm_message.content[0].text]
    text = users[0].llm_message.content[0].text
    assert text.startswith("[Pinned at event") and "not a new request" in text and "Fix the bug." in text
    assert type(sent.events[sent.events.index(users[0]) - 1]).__name__ == "CondensationSummaryEvent"
    # the SDK's stored view (what replay compared with ours) does not hold it: only what is sent
    assert all(e.id != users[0].id for e in fs.conversation.view().events)
