"""A litellm agent loop through ChatHistory, against the suite's OpenAI-compatible server on
127.0.0.1 (tests/llm_server.py: litellm makes its real HTTP requests, no key, no network).

The README's first example runs as printed (pointed at the server by litellm's own
``OPENAI_BASE_URL``); a longer loop condenses, and every request the model receives is one a
provider takes, with the summary in place of what was forgotten.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import litellm

from openhands_memory import ChatHistory
from openhands_memory.conversation.recall_tools import RECALL_TOOL_SPECS

from .chat_items import provider_problems

REPO = Path(__file__).resolve().parent.parent
TOOLS = [{"type": "function", "function": {"name": "terminal", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}}}}]


def readme_chat_example() -> str:
    text = (REPO / "README.md").read_text()
    return re.search(r"## A chat history in three lines\s+```python\n(.*?)```", text, re.S).group(1)


def test_the_readme_chat_example_runs_against_the_loopback_server(llm_server, tmp_path, monkeypatch, capsys):
    """The code as printed, in this process (litellm's import is most of a fresh one's time),
    in an empty folder, twice: the second run goes on with the same conversation."""
    code = readme_chat_example()
    assert code.splitlines()[3].startswith('h = ChatHistory("agent.db", "run-1", condenser="llm_summarizing"')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", llm_server.url)
    for run in range(2):
        llm_server.push_tool_call("terminal", {"command": "pytest -q"})
        llm_server.push_tool_call("terminal", {"command": "pytest -q tests/test_dates.py"})
        llm_server.push_text("Fixed: the parser now reads ISO weeks.")
        scope: dict = {"__name__": "__main__"}
        exec(compile(code, "README.md", "exec"), scope)
        scope["h"].close()
        assert capsys.readouterr().out == f"{6 * (run + 1)} messages to send; {6 * (run + 1)} events stored\n"
    assert llm_server.pending == 0
    for body in llm_server.requests:
        assert provider_problems(body["messages"]) == []
    last = llm_server.requests[-1]["messages"]
    assert last[0] == {"role": "user", "content": "Fix the failing date test"}
    assert [m["role"] for m in last[-6:]] == ["assistant", "user", "assistant", "tool", "assistant", "tool"]
    with ChatHistory(tmp_path / "agent.db", "run-1", create=False) as h:
        assert h.messages(condense=False)[-1]["content"] == "Fixed: the parser now reads ISO weeks."


def test_a_long_litellm_loop_is_condensed_and_every_request_is_valid(llm_server, tmp_path):
    h = ChatHistory(tmp_path / "a.db", "run", condenser={"type": "llm", "max_size": 12, "keep_first": 2})
    h.extend([{"role": "system", "content": "You fix tests."}, {"role": "user", "content": "Fix the date test"}])
    for turn in range(15):
        llm_server.push_tool_call("terminal", {"command": f"pytest -k case_{turn}"})
        reply = litellm.completion("openai/test-model", messages=h.messages(), tools=TOOLS, api_key="sk-test",
                                   api_base=llm_server.url).choices[0].message
        h.append(reply)
        for call in reply.tool_calls:
            h.append({"role": "tool", "tool_call_id": call.id, "content": f"case_{turn}: 1 failed"})
    sent = [body["messages"] for body in llm_server.requests]
    assert all(provider_problems(messages) == [] for messages in sent)
    assert max(len(m) for m in sent) <= 13  # the view stays within the condenser's bounds
    assert sent[-1][:2] == [{"role": "system", "content": "You fix tests."},
                            {"role": "user", "content": "Fix the date test"}]
    assert "digest" in sent[-1][2]["content"] and "case_3" in sent[-1][2]["content"]
    assert len(h.conversation) == 2 + 15 * 2 + len([e for e in h.conversation.events(kinds=["Condensation"])])
    calls = [json.loads(m["tool_calls"][0]["function"]["arguments"])["command"]
             for m in sent[-1] if m.get("tool_calls")]
    assert calls and calls[-1] == "pytest -k case_13"  # the newest turns, in order

    # the model asks the recall tools (JSON specs beside its own) for what was forgotten
    llm_server.push_tool_call("recall_search", {"query": "case_2"})
    reply = litellm.completion("openai/test-model", messages=h.messages(), tools=TOOLS + RECALL_TOOL_SPECS,
                               api_key="sk-test", api_base=llm_server.url).choices[0].message
    h.append(reply)
    call = reply.tool_calls[0]
    found = h.call_recall_tool(call.function.name, call.function.arguments)
    assert "case_2: 1 failed" in found and "hidden by" in found
    h.append({"role": "tool", "tool_call_id": call.id, "content": found})
    assert h.messages()[-1]["content"] == found
    assert [spec["function"]["name"] for spec in llm_server.requests[-1]["tools"][1:]] == ["recall_search",
                                                                                       "recall_read"]
    h.close()
