"""openhands_memory.llm against a real HTTP server: litellm's own request path, no mocks."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openhands_memory.errors import ConfigError
from openhands_memory.llm import (
    ContextWindowError,
    LLMConfig,
    LLMError,
    TokenizerUnavailable,
    classify_error,
    complete,
    context_window,
    count_tokens,
    effective_max_input_tokens,
)

from .llm_server import FakeLLMServer

REPO = Path(__file__).resolve().parents[1]
MESSAGES = [
    {"role": "system", "content": "You write short summaries."},
    {"role": "user", "content": "Summarise: the agent listed files."},
]


def make_config(server: FakeLLMServer, **overrides: object) -> LLMConfig:
    values: dict[str, object] = {
        "model": "openai/test-model",
        "api_base": server.url,
        "api_key": "sk-test",
        "timeout": 5.0,
        "num_retries": 2,
        "retry_min_wait": 0.01,
        "retry_max_wait": 0.05,
    }
    values.update(overrides)
    return LLMConfig(**values)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- happy paths


def test_plain_text_reply_records_usage_and_id(llm_server: FakeLLMServer) -> None:
    llm_server.push_text("The agent listed files.", prompt_tokens=42, completion_tokens=7)
    reply = complete(make_config(llm_server), MESSAGES)

    assert reply.text == "The agent listed files."
    assert reply.tool_calls == []
    assert reply.response_id == "chatcmpl-1"
    assert reply.finish_reason == "stop"
    call = reply.call
    assert (call.outcome, call.attempts, call.error) == ("ok", 1, None)
    assert (call.prompt_tokens, call.completion_tokens) == (42, 7)
    assert call.response_id == "chatcmpl-1"
    assert call.model == "openai/test-model"
    assert call.cost_usd is None  # litellm has no price for test-model
    assert 0 < call.latency_s < 5

    (sent,) = llm_server.requests
    assert sent["model"] == "test-model"
    assert sent["messages"] == MESSAGES
    assert sent.get("stream") in (None, False)
    # Unset options are not sent at all; nothing asks for prompt caching.
    assert "temperature" not in sent and "tools" not in sent
    assert "cache_control" not in json.dumps(sent)
    assert llm_server.request_headers[0]["authorization"] == "Bearer sk-test"


def test_cost_is_computed_for_a_priced_model(llm_server: FakeLLMServer) -> None:
    llm_server.push_text("ok", prompt_tokens=1000, completion_tokens=100)
    reply = complete(make_config(llm_server, model="openai/gpt-4o"), MESSAGES)
    assert reply.call.cost_usd is not None and reply.call.cost_usd > 0


def test_temperature_and_max_output_tokens_are_sent(llm_server: FakeLLMServer) -> None:
    llm_server.push_text("ok")
    complete(make_config(llm_server, temperature=0.2, max_output_tokens=321), MESSAGES)
    (sent,) = llm_server.requests
    assert sent["temperature"] == 0.2
    assert sent.get("max_tokens", sent.get("max_completion_tokens")) == 321


def test_cache_control_markers_are_stripped(llm_server: FakeLLMServer) -> None:
    llm_server.push_text("ok")
    messages = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
            "cache_control": {"type": "ephemeral"},
        }
    ]
    complete(make_config(llm_server), messages)
    assert "cache_control" not in json.dumps(llm_server.requests[0])
    assert "cache_control" in messages[0]  # the caller's list is not mutated


def test_tool_call_reply_is_parsed(llm_server: FakeLLMServer) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "record_state",
                "description": "Record the task state.",
                "parameters": {
                    "type": "object",
                    "properties": {"goal": {"type": "string"}},
                    "required": ["goal"],
                },
            },
        }
    ]
    choice = {"type": "function", "function": {"name": "record_state"}}
    llm_server.push_tool_call("record_state", {"goal": "fix the bug"})
    reply = complete(make_config(llm_server), MESSAGES, tools=tools, tool_choice=choice)

    assert reply.text in (None, "")
    assert reply.finish_reason == "tool_calls"
    (tool_call,) = reply.tool_calls
    assert tool_call.name == "record_state"
    assert json.loads(tool_call.arguments) == {"goal": "fix the bug"}
    assert tool_call.parsed_arguments() == {"goal": "fix the bug"}
    assert tool_call.id
    sent = llm_server.requests[0]
    assert sent["tools"] == tools
    assert sent["tool_choice"] == choice


def test_json_schema_reply(llm_server: FakeLLMServer) -> None:
    schema = {
        "type": "json_schema",
        "json_schema": {
            "name": "summary",
            "schema": {
                "type": "object",
                "properties": {"summary": {"type": "string"}},
                "required": ["summary"],
            },
        },
    }
    llm_server.push_json({"summary": "done"})
    reply = complete(make_config(llm_server), MESSAGES, response_format=schema)
    assert json.loads(reply.text or "") == {"summary": "done"}
    assert llm_server.requests[0]["response_format"] == schema


def test_empty_content_is_not_an_error(llm_server: FakeLLMServer) -> None:
    llm_server.push_fault("empty")
    reply = complete(make_config(llm_server), MESSAGES)
    assert reply.text in ("", None)
    assert reply.tool_calls == []
    assert reply.call.outcome == "ok"


# --------------------------------------------------------------------------- retries and faults


def test_rate_limit_then_success_is_retried(llm_server: FakeLLMServer) -> None:
    llm_server.push_fault("429")
    llm_server.push_text("second time lucky")
    started = time.perf_counter()
    reply = complete(make_config(llm_server), MESSAGES)
    assert reply.text == "second time lucky"
    assert reply.call.attempts == 2
    assert reply.call.outcome == "ok"
    assert len(llm_server.requests) == 2
    assert reply.call.latency_s <= time.perf_counter() - started
    assert time.perf_counter() - started < 2  # tiny backoff, Retry-After: 0


def test_retry_after_header_is_honoured(llm_server: FakeLLMServer) -> None:
    llm_server.push_fault("429", retry_after=0.3)
    llm_server.push_text("ok")
    reply = complete(make_config(llm_server, retry_max_wait=1.0), MESSAGES)
    assert reply.call.attempts == 2
    assert reply.call.latency_s >= 0.3


def test_retry_after_is_capped_by_retry_max_wait(llm_server: FakeLLMServer) -> None:
    llm_server.push_fault("429", retry_after=30)
    llm_server.push_text("ok")
    reply = complete(make_config(llm_server, retry_max_wait=0.05), MESSAGES)
    assert reply.call.attempts == 2
    assert reply.call.latency_s < 2


def test_rate_limit_exhausted(llm_server: FakeLLMServer) -> None:
    for _ in range(2):
        llm_server.push_fault("429")
    with pytest.raises(LLMError) as info:
        complete(make_config(llm_server, num_retries=1), MESSAGES)
    assert info.value.kind == "rate_limited"
    assert info.value.call.attempts == 2


def test_server_errors_exhaust_retries(llm_server: FakeLLMServer) -> None:
    config = make_config(llm_server, num_retries=2)
    for _ in range(config.num_retries + 1):
        llm_server.push_fault("500")
    with pytest.raises(LLMError) as info:
        complete(config, MESSAGES)
    err = info.value
    assert not isinstance(err, ContextWindowError)
    assert err.kind == err.call.outcome == "server_error"
    assert err.call.attempts == config.num_retries + 1
    assert len(llm_server.requests) == config.num_retries + 1
    assert llm_server.pending == 0
    assert err.call.error and "InternalServerError" in err.call.error
    assert (err.call.prompt_tokens, err.call.cost_usd) == (None, None)


def test_service_unavailable_then_success(llm_server: FakeLLMServer) -> None:
    llm_server.push_fault("503")
    llm_server.push_text("back")
    reply = complete(make_config(llm_server, num_retries=1), MESSAGES)
    assert (reply.text, reply.call.attempts) == ("back", 2)


def test_slow_reply_times_out_fast(llm_server: FakeLLMServer) -> None:
    llm_server.push_fault("slow", seconds=2)
    started = time.perf_counter()
    with pytest.raises(LLMError) as info:
        complete(make_config(llm_server, timeout=0.5, num_retries=0), MESSAGES)
    elapsed = time.perf_counter() - started
    assert info.value.kind == "timeout"
    assert info.value.call.attempts == 1
    assert 0.4 < info.value.call.latency_s < 1.5
    assert elapsed < 1.5


def test_malformed_json_is_a_bad_response_and_not_retried(llm_server: FakeLLMServer) -> None:
    # litellm reports it as InternalServerError(500); we look at the JSONDecodeError cause.
    llm_server.push_fault("malformed_json")
    with pytest.raises(LLMError) as info:
        complete(make_config(llm_server, num_retries=2), MESSAGES)
    assert info.value.kind == "bad_response"
    assert info.value.call.attempts == 1
    assert len(llm_server.requests) == 1


def test_context_window_is_not_retried(llm_server: FakeLLMServer) -> None:
    llm_server.push_fault("context_window")
    with pytest.raises(ContextWindowError) as info:
        complete(make_config(llm_server, num_retries=3), MESSAGES)
    assert info.value.kind == "context_window"
    assert info.value.call.outcome == "context_window"
    assert info.value.call.attempts == 1
    assert len(llm_server.requests) == 1


def test_auth_error_is_not_retried_and_key_is_not_leaked(llm_server: FakeLLMServer) -> None:
    llm_server.push_fault("401")
    with pytest.raises(LLMError) as info:
        complete(make_config(llm_server, num_retries=3, api_key="sk-very-secret-1234"), MESSAGES)
    assert info.value.kind == "error"
    assert info.value.call.attempts == 1
    assert "sk-very-secret-1234" not in str(info.value)
    assert "sk-very-secret-1234" not in repr(info.value.call)


def test_bad_request_is_not_retried(llm_server: FakeLLMServer) -> None:
    llm_server.push_fault("400")
    with pytest.raises(LLMError) as info:
        complete(make_config(llm_server, num_retries=3), MESSAGES)
    assert (info.value.kind, info.value.call.attempts) == ("error", 1)


def test_connection_refused_is_a_connection_error_naming_the_address() -> None:
    """No HTTP exchange happened: no status (litellm says 500), and the address tried."""
    server = FakeLLMServer().start()
    url = server.url
    server.stop()
    config = LLMConfig(model="openai/test-model", api_base=url, api_key="sk-test", num_retries=0)
    with pytest.raises(LLMError) as info:
        complete(config, MESSAGES)
    assert (info.value.kind, info.value.status, info.value.target) == ("connection_error", None, url)
    assert info.value.brief == f"openai/test-model: connection_error (could not connect to {url}) after 1 attempt"


@pytest.mark.parametrize(
    "message",
    [
        "prompt is too long: 210000 tokens > 200000 maximum",
        "This model's maximum context length is 4096 tokens",
        "Please reduce the length of the messages or completion.",
        "input exceeds the context window of this model",
        "context length exceeded",
    ],
)
def test_context_window_phrases_are_recognised(message: str) -> None:
    assert classify_error(RuntimeError(message)) == "context_window"


def test_unrelated_errors_are_plain_errors() -> None:
    assert classify_error(RuntimeError("something odd")) == "error"


# --------------------------------------------------------------------------- config


def test_api_key_never_in_repr() -> None:
    config = LLMConfig(model="openai/gpt-4o", api_key="sk-live-abcdef")
    assert "sk-live-abcdef" not in repr(config)
    assert "sk-live-abcdef" not in str(config)
    assert "***" in repr(config)
    assert "api_key=None" in repr(LLMConfig(model="openai/gpt-4o"))


def test_from_mapping_reads_openhands_keys() -> None:
    config = LLMConfig.from_mapping(
        "condenser",
        {
            "model": "openai/gpt-4o",
            "api_key": "k",
            "base_url": "http://127.0.0.1:1/v1",
            "timeout": 30,
            "num_retries": 1,
            "retry_min_wait": 0.5,
            "retry_max_wait": 2,
            "temperature": 0.1,
            "max_output_tokens": 512,
            "max_input_tokens": 1024,
            "custom_llm_provider": "openai",
            "caching_prompt": True,  # OpenHands key we ignore
            "max_message_chars": 30000,
            "top_p": 1.0,
            "drop_params": True,
        },
    )
    assert config.api_base == "http://127.0.0.1:1/v1"
    assert (config.timeout, config.num_retries, config.max_input_tokens) == (30.0, 1, 1024)
    assert effective_max_input_tokens(config) == 1024


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"model": "gpt-4o", "temprature": 0.1}, "llm.summ.temprature"),
        ({"model": "gpt-4o", "timeout": "fast"}, "llm.summ.timeout"),
        ({"model": "gpt-4o", "num_retries": -1}, "llm.summ.num_retries"),
        ({"model": "gpt-4o", "num_retries": 1.5}, "llm.summ.num_retries"),
        ({"model": "gpt-4o", "max_output_tokens": True}, "llm.summ.max_output_tokens"),
        ({"api_key": "x"}, "llm.summ.model"),
        ({"model": "gpt-4o", "retry_min_wait": 5, "retry_max_wait": 1}, "llm.summ.retry_min_wait"),
        ({"model": "gpt-4o", "base_url": "http://a", "api_base": "http://b"}, "llm.summ."),
    ],
)
def test_from_mapping_errors_name_the_key(data: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")):
        LLMConfig.from_mapping("summ", data)


def test_from_mapping_suggests_a_spelling() -> None:
    with pytest.raises(ConfigError, match="did you mean 'temperature'"):
        LLMConfig.from_mapping("x", {"model": "gpt-4o", "temprature": 0.1})


def test_from_env() -> None:
    assert LLMConfig.from_env({}) is None
    fallback = LLMConfig.from_env(
        {"LLM_MODEL": "gpt-4o", "LLM_BASE_URL": "http://h/v1", "LLM_API_KEY": "k1"}
    )
    assert fallback is not None
    assert (fallback.model, fallback.api_base, fallback.api_key_value()) == ("gpt-4o", "http://h/v1", "k1")
    ours = LLMConfig.from_env(
        {
            "LLM_MODEL": "gpt-4o",
            "OPENHANDS_MEMORY_LLM_MODEL": "openai/mine",
            "OPENHANDS_MEMORY_LLM_API_BASE": "http://mine/v1",
            "OPENHANDS_MEMORY_LLM_API_KEY": "k2",
        }
    )
    assert ours is not None
    assert (ours.model, ours.api_base, ours.api_key_value()) == ("openai/mine", "http://mine/v1", "k2")


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ConfigError, match="LLMConfig.timeout"):
        LLMConfig(model="gpt-4o", timeout=0)
    with pytest.raises(ConfigError, match="LLMConfig.model"):
        LLMConfig(model="")
    for kwargs, message in [
        ({"timeout": "fast"}, "LLMConfig.timeout ('fast') must be a number"),
        ({"num_retries": 1.5}, "LLMConfig.num_retries (1.5) must be an integer"),
        ({"temperature": float("inf")}, "LLMConfig.temperature (inf) must be a finite number"),
        ({"retry_min_wait": 5, "retry_max_wait": 1}, "LLMConfig.retry_min_wait (5) must not exceed retry_max_wait (1)"),
        ({"temprature": 0.1}, "LLMConfig.temprature is not a setting of LLMConfig; did you mean 'temperature'?"),
    ]:
        with pytest.raises(ConfigError) as info:
            LLMConfig(model="gpt-4o", **kwargs)  # type: ignore[arg-type]
        assert str(info.value) == message
    # An empty string in a TOML file means "not set"; a whole number of seconds is a number.
    config = LLMConfig(model="gpt-4o", api_key="", timeout=5)
    assert (config.api_key_value(), config.timeout) == (None, 5.0)


@settings(max_examples=50, deadline=None)
@given(
    lo=st.floats(min_value=0, max_value=5),
    extra=st.floats(min_value=0, max_value=30),
    retry_number=st.integers(min_value=1, max_value=40),
    server_wait=st.one_of(st.none(), st.floats(min_value=0, max_value=1000)),
)
def test_retry_delay_stays_within_bounds(
    lo: float, extra: float, retry_number: int, server_wait: float | None
) -> None:
    from openhands_memory.llm.retry import retry_delay

    config = LLMConfig(model="m", retry_min_wait=lo, retry_max_wait=lo + extra)

    class FakeHeaders(dict):
        pass

    exc = RuntimeError("x")
    if server_wait is not None:
        exc.litellm_response_headers = FakeHeaders({"retry-after": str(server_wait)})  # type: ignore[attr-defined]
    delay = retry_delay(config, retry_number, exc)
    assert lo <= delay <= lo + extra
    if server_wait is not None:
        assert delay >= min(server_wait, lo + extra)


# --------------------------------------------------------------------------- tokens and windows


def test_count_tokens() -> None:
    n = count_tokens("gpt-4o", "The agent listed the files in the repository.")
    assert isinstance(n, int) and n > 0
    m = count_tokens("gpt-4o", MESSAGES)
    assert isinstance(m, int) and m > 0


def test_count_tokens_failure_is_loud() -> None:
    with pytest.raises(TokenizerUnavailable):
        count_tokens("gpt-4o", 12345)  # type: ignore[arg-type]


def test_context_window() -> None:
    window = context_window("gpt-4o")
    assert isinstance(window, int) and window > 0
    assert context_window("no-such-provider/no-such-model-xyz") is None
    assert context_window("openai/test-model") is None


def test_import_is_lazy() -> None:
    code = (
        "import sys, openhands_memory.llm as m; "
        "assert 'litellm' not in sys.modules, 'litellm imported eagerly'; "
        "m.LLMConfig(model='gpt-4o'); "
        "assert 'litellm' not in sys.modules"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
