"""Token counts, prices and context windows read without litellm equal litellm's own.

``llm/counting.py`` and ``llm/price_map.py`` answer from the files litellm ships without
importing it. These tests import litellm and hold the answers to its ``token_counter``,
``get_model_info`` and ``cost_per_token``: every price-map entry the offline lookup answers
for, the tokenizer of every chat model in the map, texts and message lists drawn by
hypothesis, and a whole replay counted and priced as gpt-4o. In a process whose network is
unreachable (its own network namespace) the counts are the same, from litellm's files, and
nothing is downloaded or written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm must not fetch its map

import litellm  # noqa: E402

from openhands_memory.conversation import EventStore  # noqa: E402
from openhands_memory.llm import context_window, count_tokens, token_prices  # noqa: E402
from openhands_memory.llm.counting import count_messages, encoding, huggingface_kind, text_counter  # noqa: E402
from openhands_memory.llm.price_map import DIRECT_PROVIDERS, entry, price_map  # noqa: E402

from . import factories as f  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

# The models the project is used with (README, tests, docs), one of each tokenizer path:
# o200k_base, cl100k_base, the bundled Anthropic and DeepSeek tokenizers, provider prefixes.
MODELS = ["gpt-4o", "gpt-4o-mini", "openai/gpt-4o", "azure/gpt-4o", "gpt-4", "gpt-3.5-turbo", "gpt-4.1", "gpt-5",
          "o3-mini", "o1", "claude-sonnet-4-5-20250929", "anthropic/claude-sonnet-4-5-20250929",
          "claude-3-5-sonnet-20240620", "deepseek/deepseek-chat", "deepseek-reasoner", "openai/test-model",
          "openrouter/z-ai/glm-4.6", "moonshot/kimi-k2-thinking", "gpt-oss-120b", "gemini/gemini-2.5-pro",
          "mistral/mistral-large-latest"]

MESSAGES = [
    {"role": "system", "content": "You are a careful coding agent."},
    {"role": "user", "content": [{"type": "text", "text": "Fix the date parser <|endoftext|> in utils.py"}]},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "Let me look first."}], "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "ls -la"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "name": "terminal", "content": "total 8\n" + "drwxr-xr-x " * 300},
    {"role": "assistant", "content": "Done: the parser reads ISO dates now. ✓ 日付", "reasoning_content": None},
]


def test_the_installed_litellm_is_a_release_these_rules_were_checked_against():
    """Another release may count or look names up otherwise, so the library asks it instead
    (slowly); run these tests against it and add it to CHECKED_RELEASES when they pass."""
    from openhands_memory.llm import counting, price_map as prices

    release = prices.litellm_release()
    assert release in counting.CHECKED_RELEASES and release in prices.CHECKED_RELEASES, release


def test_with_a_release_not_checked_litellm_counts_and_prices(monkeypatch):
    from openhands_memory.llm import counting, price_map as prices

    monkeypatch.setattr(prices, "litellm_release", lambda: "0.0.0")
    monkeypatch.setattr(counting, "litellm_release", lambda: "0.0.0")
    counting.text_counter.cache_clear()
    try:
        assert counting.text_counter("gpt-4o") is None and entry("gpt-4o") is None
        assert count_tokens("gpt-4o", MESSAGES) == litellm.token_counter(model="gpt-4o", messages=MESSAGES)
        assert token_prices("gpt-4o") == litellm_prices("gpt-4o")[0]
    finally:
        counting.text_counter.cache_clear()


def litellm_prices(model: str) -> tuple[tuple[float, float | None, float] | None, int | None]:
    try:
        info = litellm.get_model_info(model)
    except Exception:
        return None, None

    def price(key: str) -> float | None:
        value = info.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    window = info.get("max_input_tokens")
    return ((price("input_cost_per_token") or 0.0, price("cache_read_input_token_cost"),
             price("output_cost_per_token") or 0.0), window if isinstance(window, int) and window > 0 else None)


def direct_names() -> list[str]:
    names = []
    for key, value in price_map().items():
        provider = value.get("litellm_provider")
        if provider in DIRECT_PROVIDERS:
            names.append(key)
            if not key.startswith(f"{provider}/"):
                names.append(f"{provider}/{key}")
    return names


def test_every_entry_read_offline_is_litellms():
    compared = []
    for name in direct_names():
        found = entry(name)
        if found is None:
            continue
        prices, window = litellm_prices(name)
        assert (token_prices(name), context_window(name)) == (prices, window), name
        compared.append(name)
    assert {"gpt-4o", "openai/gpt-4o", "gpt-4o-mini", "claude-sonnet-4-5-20250929",
            "anthropic/claude-sonnet-4-5-20250929"} <= set(compared)
    assert len(compared) > 500


def test_costs_from_offline_prices_are_litellms_cost_per_token():
    compared = 0
    for name in direct_names():
        found = entry(name)
        if found is None or found.get("mode") != "chat" or "off_peak_pricing" in found:
            continue  # (off-peak prices: cost_per_token's depend on the hour; token_prices has the base)
        prices = token_prices(name)
        assert prices is not None
        try:
            prompt, completion = litellm.cost_per_token(model=name, prompt_tokens=1234, completion_tokens=567)
        except litellm.exceptions.BadRequestError:  # a bare name litellm prices but cannot route
            continue
        assert (prompt, completion) == (1234 * prices[0], 567 * prices[2]), name
        compared += 1
    assert compared > 200


def test_names_the_offline_lookup_does_not_know_are_litellms_to_answer():
    assert entry("GPT-4o") is None and entry("no-such-provider/no-such-model-xyz") is None
    assert token_prices("no-such-provider/no-such-model-xyz") is None
    assert context_window("openai/test-model") is None


def test_every_model_in_the_map_gets_litellms_tokenizer():
    """The rules that choose a tokenizer, for every name in the map (bare and behind its
    provider): the same Hugging Face tokenizer or tiktoken encoding, and message overheads."""
    from litellm.litellm_core_utils.token_counter import openai_tokenizer_encoding_name, uses_legacy_message_accounting
    from litellm.utils import huggingface_tokenizer_kind

    from openhands_memory.llm.counting import _fix_model_name, encoding_name

    names = [*price_map(), *(f"{v['litellm_provider']}/{k}" for k, v in price_map().items()
                             if isinstance(v.get("litellm_provider"), str))]
    assert len(names) > 5000
    for name in names:
        assert huggingface_kind(name) == huggingface_tokenizer_kind(name), name
        assert encoding_name(name) == openai_tokenizer_encoding_name(name), name
        assert (_fix_model_name(name) == "gpt-3.5-turbo-0301") == uses_legacy_message_accounting(name), name


@pytest.mark.parametrize("model", MODELS)
def test_counts_as_litellm_for_the_projects_models(model):
    assert text_counter(model) is not None and count_messages(model, MESSAGES) is not None
    assert count_tokens(model, MESSAGES) == litellm.token_counter(model=model, messages=MESSAGES)
    text = "def parse(d):\n    return datetime.fromisoformat(d)  # <|endoftext|> ünïcødé 😀\n" * 120
    assert count_tokens(model, text) == litellm.token_counter(model=model, text=text)
    assert count_tokens(model, []) == litellm.token_counter(model=model, messages=[])


def test_a_text_past_the_exact_limit_is_extrapolated_as_litellm_does():
    text = "word salad, " * 333_342  # 4,000,104 characters: past litellm's 4,000,000
    assert count_tokens("gpt-4o", text) == litellm.token_counter(model="gpt-4o", text=text)


FRAGMENTS = st.sampled_from(["<|endoftext|>", "<|fim_prefix|>", " ", "\n", "\t", "    ", "a" * 1500, "é", "😀",
                             "日本語", "\r\n", "1234567", "'s", "def f():"])
TEXTS = st.lists(st.one_of(st.text(max_size=40), FRAGMENTS), max_size=30).map("".join)
PART = st.one_of(TEXTS, st.builds(lambda t: {"type": "text", "text": t}, TEXTS),
                 st.builds(lambda t: {"type": "thinking", "thinking": t}, TEXTS))
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"]),
     "content": st.one_of(st.none(), TEXTS, st.lists(PART, max_size=4))},
    optional={"name": TEXTS, "tool_call_id": TEXTS,
              "tool_calls": st.lists(st.builds(lambda a: {"id": "c", "type": "function",
                                                          "function": {"name": "t", "arguments": a}}, TEXTS),
                                     max_size=3)},
)


@settings(max_examples=60, deadline=None, database=None)
@given(model=st.sampled_from(MODELS), text=TEXTS, messages=st.lists(MESSAGE, max_size=5))
def test_drawn_texts_and_messages_count_as_litellm(model, text, messages):
    assert count_tokens(model, text) == litellm.token_counter(model=model, text=text)
    assert count_messages(model, messages) == litellm.token_counter(model=model, messages=messages)


class LitellmCounter:
    """The token counter the library used before it read litellm's files itself."""

    def __init__(self, model: str):
        self.model = model
        self.name = f"litellm:{model}"

    def count(self, messages: list[dict]) -> int:
        return litellm.token_counter(model=self.model, messages=messages) if messages else 0


def test_a_replay_counted_and_priced_as_gpt_4o_is_litellms(tmp_path):
    from openhands_memory.cli.commands_replay import _strategies
    from openhands_memory.replay.report import Prices

    db = tmp_path / "agent.db"
    with EventStore(db) as store:
        events = [f.system(), f.user("fix the date parser: it fails on 2024-02-30 <|endoftext|>")]
        for i in range(40):
            events += [f.action(f"r{i}", f"call{i}", think=i % 3 == 0, thought=f"step {i}: ünïcødé"),
                       f.observation(f"call{i}", "line of output 日本\n" * (i % 7 * 40))]
        events.append(f.agent_says("fixed"))
        store.create_conversation("c").append_many(events)
    done = subprocess.run([sys.executable, "-m", "openhands_memory.cli", "replay", str(db), "c", "--model", "gpt-4o",
                           "--json"], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    prices, _ = litellm_prices("gpt-4o")
    assert prices is not None
    with EventStore(db, create=False, readonly=True) as store:
        theirs = store.conversation("c").replay(
            _strategies((), (), ()), counter=LitellmCounter("gpt-4o"),
            prices=Prices(model="gpt-4o", input=prices[0], cached_input=prices[1], output=prices[2]))
    assert json.loads(done.stdout) == json.loads(theirs.model_dump_json())


NO_NETWORK_CHILD = """\
import json, os, sys
from openhands_memory.llm import count_tokens, token_prices
from openhands_memory.llm.counting import encoding
messages, models = json.loads(sys.argv[1]), json.loads(sys.argv[2])
out = {"counts": {m: count_tokens(m, messages) for m in models}, "prices": {m: token_prices(m) for m in models[:4]}}
out["p50k"] = len(encoding("p50k_base").encode("hello world"))
try:
    encoding("r50k_base")
except LookupError as e:
    out["r50k"] = str(e)
out["litellm"] = "litellm" in sys.modules
out["cache_dir"] = os.environ.get("TIKTOKEN_CACHE_DIR")
print(json.dumps(out))
"""


def test_counts_come_from_litellms_files_with_the_network_unreachable(tmp_path):
    unshare = shutil.which("unshare")
    if unshare is None or subprocess.run([unshare, "-n", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs unshare -n (a network namespace of its own) to cut the network")
    cache = tmp_path / "tiktoken-cache"  # where tiktoken would keep a download: must stay empty
    cache.mkdir()
    models = ["gpt-4o", "gpt-4", "claude-sonnet-4-5-20250929", "deepseek/deepseek-chat", "openai/test-model"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "TIKTOKEN_CACHE_DIR": str(cache), "HOME": str(tmp_path)}
    env.pop("LITELLM_LOCAL_MODEL_COST_MAP", None)
    done = subprocess.run([unshare, "-n", sys.executable, "-c", NO_NETWORK_CHILD, json.dumps(MESSAGES),
                           json.dumps(models)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["counts"] == {m: litellm.token_counter(model=m, messages=MESSAGES) for m in models}
    assert out["prices"] == {m: list(litellm_prices(m)[0]) for m in models[:4]}
    from litellm.litellm_core_utils import default_encoding  # noqa: F401 - points tiktoken at litellm's files
    import tiktoken

    assert out["p50k"] == len(tiktoken.get_encoding("p50k_base").encode("hello world"))
    assert out["r50k"].startswith("r50k_base: ") and "No such file" in out["r50k"]  # not downloaded
    assert out["litellm"] is False
    assert out["cache_dir"] == str(cache)  # put back after each load
    assert list(cache.iterdir()) == []
