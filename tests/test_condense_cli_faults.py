"""`condense` against a failing model: the failure is said, never passed off as success.

Every fault kind of the loopback server (tests/llm_server.py) is thrown at the command with
an `llm` condenser. A soft trigger (too many events) whose model call fails writes no
condensation and exits 1 with one line naming the model and the fault; a hard one
(a condensation request) falls back as configured and says so; a dry run never calls the
model unless --with-summary asks it; a dripping server cannot hold a call past its timeout;
a 20 MB reply is refused, not stored.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from openhands_memory.llm import MAX_REPLY_CHARS
from openhands_memory.conversation import EventStore

from . import factories as f
from .cli_runner import invoke
from .llm_server import FakeLLMServer, fault_reply, text_reply

FAULTS = ["429", "500", "503", "401", "400", "context_window", "malformed_json", "html", "empty",
          "empty_choices", "huge", "reset", "slow", "drip"]


def flat(text: str) -> str:
    """Output with wrapped lines joined again."""
    return " ".join(text.split())


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """Conversation ``c``: a system prompt, a request and 20 tool calls with results (42
    events), more than the condenser's max_size of 20."""
    path = tmp_path_factory.mktemp("faults") / "agent.db"
    with EventStore(path) as store:
        conv = store.create_conversation("c")
        events = [f.system(), f.user("fix the date parser")]
        for i in range(20):
            events += [f.action(f"r{i}", f"call{i}"), f.observation(f"call{i}")]
        conv.append_many(events)
    return path


@pytest.fixture
def db(template, tmp_path) -> Path:
    target = tmp_path / "agent.db"
    shutil.copyfile(template, target)
    return target


@pytest.fixture(scope="module", autouse=True)
def warm_litellm():
    """One call first: litellm loads its provider code on the first completion, which must
    not count against the short timeouts below."""
    from openhands_memory.llm import LLMConfig, complete

    with FakeLLMServer(lambda body: text_reply("warm")) as s:
        complete(LLMConfig(model="openai/test-model", api_base=s.url, api_key="sk-test"),
                 [{"role": "user", "content": "hi"}])


@pytest.fixture
def server():
    s = FakeLLMServer().start()
    yield s
    s.stop()


def config(tmp_path: Path, server: FakeLLMServer, *, fallback: str = "offline", timeout: float = 1.0) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f"""
[condenser]
type = "llm"
llm_config = "summarizer"
max_size = 20
keep_first = 2
hard_fallback = "{fallback}"

[llm.summarizer]
model = "openai/test-model"
api_base = "{server.url}"
api_key = "sk-test"
timeout = {timeout}
num_retries = 1
retry_min_wait = 0.01
retry_max_wait = 0.05
""")
    return path


def condensations(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM condensation").fetchone()[0]


def ledger(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [r[0] for r in conn.execute("SELECT outcome FROM llm_call ORDER BY id")]


def always(server: FakeLLMServer, kind: str, seconds: float = 30.0) -> None:
    server.responder = lambda body: fault_reply(kind, seconds=seconds)


@pytest.mark.parametrize("fault", FAULTS)
def test_model_failure_on_a_soft_trigger_exits_1_and_stores_nothing(db, tmp_path, server, fault):
    always(server, fault, seconds=0.2 if fault == "drip" else 30.0)
    started = time.monotonic()
    result = invoke("condense", db, "c", "--config", config(tmp_path, server))
    elapsed = time.monotonic() - started
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: condense: openai/test-model: "), result.stderr
    assert "no condensation was stored" in lines[0]
    assert "nothing to condense" not in result.output
    assert condensations(db) == 0
    assert ledger(db) and "ok" not in ledger(db)  # the failed call is on record
    assert server.requests  # the model really was asked
    # Two attempts of at most 1 s each (timeout = 1, num_retries = 1), whatever the server
    # does, plus the process's own work: far below a dripped reply's minutes.
    assert elapsed < 20


def test_failure_reasons_are_named(db, tmp_path, server):
    always(server, "401")
    assert "error (HTTP 401) after 1 attempt" in invoke("condense", db, "c", "--config", config(tmp_path, server)).stderr
    always(server, "500")
    assert "server_error (HTTP 500) after 2 attempts" in invoke(
        "condense", db, "c", "--config", config(tmp_path, server)).stderr
    always(server, "slow")
    assert "timeout after 2 attempts" in invoke("condense", db, "c", "--config", config(tmp_path, server)).stderr


def test_a_huge_reply_is_refused_not_stored(db, tmp_path, server):
    always(server, "huge")
    # 20 MB take a while to send on a loaded machine: a generous timeout, so the reply's size
    # (not the clock) is what refuses it.
    result = invoke("condense", db, "c", "--config", config(tmp_path, server, timeout=30.0))
    assert result.exit_code == 1 and "bad_response" in result.stderr
    assert condensations(db) == 0
    with sqlite3.connect(db) as conn:
        (error,) = conn.execute("SELECT error FROM llm_call").fetchone()
    assert f"more than the {MAX_REPLY_CHARS:,} allowed" in error


def test_hard_trigger_falls_back_and_says_so(db, tmp_path, server):
    assert invoke("request-condensation", db, "c").exit_code == 0
    always(server, "500")
    result = invoke("condense", db, "c", "--config", config(tmp_path, server))
    assert result.exit_code == 0, result.output
    assert "fallback offline, because the model failed: openai/test-model: server_error" in flat(result.stdout)
    assert "written by the offline summarizer" in flat(result.stdout)
    assert condensations(db) == 1
    assert all(len(line) <= 80 for line in result.output.splitlines())


def test_hard_trigger_with_raise_exits_1(db, tmp_path, server):
    assert invoke("request-condensation", db, "c").exit_code == 0
    always(server, "429")
    result = invoke("condense", db, "c", "--config", config(tmp_path, server, fallback="raise"))
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: condense: openai/test-model: rate_limited (HTTP 429)")
    assert condensations(db) == 0


def test_success_names_the_model(db, tmp_path, server):
    server.responder = lambda body: text_reply("## Summary\nthe parser was fixed")
    result = invoke("condense", db, "c", "--config", config(tmp_path, server))
    assert result.exit_code == 0, result.output
    assert "written by model openai/test-model" in flat(result.stdout)
    assert condensations(db) == 1


def test_dry_run_calls_no_model_unless_asked(db, tmp_path, server):
    server.responder = lambda body: text_reply("## Summary\nmodel words")
    result = invoke("condense", db, "c", "--config", config(tmp_path, server), "--dry-run")
    assert result.exit_code == 0, result.output
    assert server.requests == []
    assert "not asked in a dry run (--with-summary asks it)" in flat(result.stdout)
    assert "dry run: nothing was written" in result.stdout
    result = invoke("condense", db, "c", "--config", config(tmp_path, server), "--dry-run", "--with-summary")
    assert result.exit_code == 0, result.output
    assert len(server.requests) == 1 and "model words" in result.stdout
    assert condensations(db) == 0 and ledger(db) == []


def test_dry_run_of_llm_attention_says_it_needs_the_model(db, tmp_path, server):
    path = config(tmp_path, server)
    path.write_text(path.read_text().replace('type = "llm"', 'type = "llm_attention"'))
    result = invoke("condense", db, "c", "--config", path, "--dry-run")
    assert result.exit_code == 0, result.output
    assert server.requests == []
    assert "a dry run does not call it (add --with-summary to ask it)" in flat(result.output)


@pytest.mark.parametrize("kind, settings, shown", [
    ("recent", ["--set", "max_events=10", "--set", "keep_first=1"], "leaves out"),
    ("observation_masking", ["--set", "attention_window=4"], "masks"),
])
def test_dry_run_of_an_in_memory_strategy_shows_what_is_sent(db, kind, settings, shown):
    result = invoke("condense", db, "c", "--type", kind, *settings, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "rewrites the view in memory only" in result.stdout
    assert f"  {shown}" in result.stdout
    assert "keeps the view" not in result.stdout
    json_result = invoke("condense", db, "c", "--type", kind, *settings, "--dry-run", "--json")
    assert '"in_memory"' in json_result.stdout


def test_offline_summarizer_is_named_when_llm_config_is_missing(db):
    result = invoke("condense", db, "c", "--type", "llm", "--set", "max_size=20", "--set", "keep_first=2")
    assert result.exit_code == 0, result.output
    assert "written by the offline summarizer (llm has no llm_config)" in flat(result.stdout)
