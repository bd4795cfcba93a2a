"""OpenHands-style TOML configuration of condensers.

Sources: legacy reference §4 (``condenser_config_from_toml_section``, pipelines as
``[[condenser.condensers]]``, ``llm_config`` naming an ``[llm.NAME]`` section, named
``[condenser.NAME]`` sections) and §7.4 (the upstream config tests). Where OpenHands falls
back to a silent NoOp, this library raises ``ConfigError`` naming the key.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from typing import Any

import pytest

from openhands_memory import condensers
from openhands_memory.config import condenser_from_toml, load_condenser
from openhands_memory.errors import ConfigError

TYPES = condensers.CONDENSER_TYPES
LLM_TYPES = ("llm", "structured", "llm_attention")

LLM_SECTION = """
[llm.condenser_llm]
model = "gpt-4"
api_key = "test-key"
"""

# Explicit, non-default values for every setting a type has (LLM types get llm_config too).
EXPLICIT: dict[str, dict[str, Any]] = {
    "noop": {},
    "conversation_window": {},
    "observation_masking": {"attention_window": 7},
    "browser_output_masking": {"attention_window": 2},
    "recent": {"keep_first": 3, "max_events": 15},
    "amortized": {
        "max_size": 50, "keep_first": 10, "max_tokens": 5000, "tokenizer": "chars/4",
        "minimum_progress": 0.2, "hard_fallback": "reset",
    },
    "llm": {"keep_first": 2, "max_size": 50, "max_event_length": 5000, "hard_fallback": "reset"},
    "structured": {"keep_first": 2, "max_size": 50, "max_event_length": 5000},
    "llm_attention": {"keep_first": 2, "max_size": 50, "hard_fallback": "raise"},
}


def toml_value(v: Any) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v)


def section(values: dict[str, Any], header: str = "[condenser]") -> str:
    return "\n".join([header, *(f"{k} = {toml_value(v)}" for k, v in values.items())]) + "\n"


def load_text(tmp_path, text: str, name: str | None = None):
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load_condenser(path, name)


def settings(obj) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init}


def registered(kind: str) -> None:
    if kind not in TYPES:
        pytest.skip(f"condenser type {kind!r} is not registered yet")


# --- every type, defaults and explicit values -----------------------------------------------


def test_every_registered_type_has_an_explicit_case():
    assert set(TYPES) - {"pipeline"} <= set(EXPLICIT)


@pytest.mark.parametrize("kind", sorted(set(EXPLICIT) | {"pipeline"}))
def test_type_loads_with_its_defaults(tmp_path, kind):
    registered(kind)
    cls = TYPES[kind]
    built = load_text(tmp_path, f'[condenser]\ntype = "{kind}"\n')
    assert type(built) is cls
    assert settings(built) == settings(cls())
    assert built.config()["type"] == kind


@pytest.mark.parametrize("kind", sorted(EXPLICIT))
def test_type_loads_with_explicit_values(tmp_path, kind):
    registered(kind)
    values = dict(EXPLICIT[kind])
    text = section({"type": kind, **values})
    if kind in LLM_TYPES:
        text = section({"type": kind, "llm_config": "condenser_llm", **values}) + LLM_SECTION
    built = load_text(tmp_path, text)
    assert type(built) is TYPES[kind]
    for key, value in values.items():
        assert getattr(built, key) == value, key
    defaults = settings(TYPES[kind]())
    for key, value in values.items():
        assert defaults[key] != value, f"{key}: pick a non-default value so the test means something"
    if kind in LLM_TYPES:
        assert built.llm_config.model == "gpt-4"
        assert built.llm_config.api_key_value() == "test-key"
        assert "test-key" not in repr(built) and "test-key" not in str(built.config())


def test_dict_and_file_agree(tmp_path):
    text = section({"type": "recent", "keep_first": 3, "max_events": 15})
    assert condenser_from_toml(tomllib.loads(text)) == load_text(tmp_path, text)


# --- pipelines ----------------------------------------------------------------------------


def test_pipeline_of_array_tables(tmp_path):
    built = load_text(tmp_path, """
[condenser]
type = "pipeline"

[[condenser.condensers]]
type = "conversation_window"

[[condenser.condensers]]
type = "browser_output_masking"
attention_window = 2

[[condenser.condensers]]
type = "amortized"
keep_first = 4
max_size = 120
""")
    assert isinstance(built, condensers.PipelineCondenser)
    a, b, c = built.condensers
    assert isinstance(a, condensers.ConversationWindowCondenser)
    assert isinstance(b, condensers.BrowserOutputCondenser) and b.attention_window == 2
    assert isinstance(c, condensers.AmortizedForgettingCondenser) and (c.keep_first, c.max_size) == (4, 120)
    assert built.handles_condensation_requests()
    assert [x["type"] for x in built.config()["condensers"]] == [
        "conversation_window", "browser_output_masking", "amortized"]


def test_nested_pipelines(tmp_path):
    built = load_text(tmp_path, """
[condenser]
type = "pipeline"

[[condenser.condensers]]
type = "pipeline"

[[condenser.condensers.condensers]]
type = "observation_masking"
attention_window = 3

[[condenser.condensers.condensers]]
type = "noop"

[[condenser.condensers]]
type = "recent"
max_events = 20
""")
    inner, recent = built.condensers
    assert isinstance(inner, condensers.PipelineCondenser)
    assert [type(x) for x in inner.condensers] == [condensers.ObservationMaskingCondenser, condensers.NoOpCondenser]
    assert inner.condensers[0].attention_window == 3
    assert isinstance(recent, condensers.RecentEventsCondenser) and recent.max_events == 20


def test_empty_pipeline_is_identity(tmp_path):
    built = load_text(tmp_path, '[condenser]\ntype = "pipeline"\ncondensers = []\n')
    assert built.condensers == []


@pytest.mark.parametrize("kind", LLM_TYPES)
def test_nested_llm_config_name_resolves(tmp_path, kind):
    # OpenHands never resolves a name inside a pipeline (the whole condenser became NoOp)
    registered(kind)
    built = load_text(tmp_path, f"""
[condenser]
type = "pipeline"

[[condenser.condensers]]
type = "conversation_window"

[[condenser.condensers]]
type = "{kind}"
llm_config = "condenser_llm"
keep_first = 4
max_size = 120
""" + LLM_SECTION)
    inner = built.condensers[1]
    assert type(inner) is TYPES[kind]
    assert inner.llm_config.model == "gpt-4"


# --- llm_config ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", LLM_TYPES)
def test_llm_config_name_resolves(tmp_path, kind):
    # includes "structured", which OpenHands' section parser did not resolve
    registered(kind)
    built = load_text(tmp_path, section({"type": kind, "llm_config": "condenser_llm"}) + LLM_SECTION)
    assert built.llm_config.model == "gpt-4" and built.llm_config.api_key_value() == "test-key"


@pytest.mark.parametrize("kind", LLM_TYPES)
def test_llm_config_inline_table(tmp_path, kind):
    registered(kind)
    built = load_text(tmp_path, f"""
[condenser]
type = "{kind}"
llm_config = {{ model = "gpt-4o-mini", api_key = "inline-key", temperature = 0.1 }}
""")
    assert built.llm_config.model == "gpt-4o-mini"
    assert built.llm_config.api_key_value() == "inline-key"
    assert built.llm_config.temperature == 0.1


@pytest.mark.parametrize("kind", LLM_TYPES)
def test_llm_types_run_offline_without_llm_config(tmp_path, kind):
    registered(kind)
    assert load_text(tmp_path, f'[condenser]\ntype = "{kind}"\n').llm_config is None


# --- named sections ---------------------------------------------------------------------------

NAMED = """
[condenser.my_summarizer]
type = "llm"
llm_config = "condenser_llm"
max_size = 50

[condenser.window]
type = "conversation_window"

[condenser.bad]
type = "amortized"
max_size = 10
keep_first = 5
""" + LLM_SECTION


def test_named_sections(tmp_path):
    registered("llm")
    summarizer = load_text(tmp_path, NAMED, "my_summarizer")
    assert type(summarizer) is TYPES["llm"] and summarizer.max_size == 50
    assert summarizer.llm_config.model == "gpt-4"
    assert isinstance(load_text(tmp_path, NAMED, "window"), condensers.ConversationWindowCondenser)


# --- errors name the key path ----------------------------------------------------------------

ERRORS = [
    ("missing type", "[condenser]\nmax_size = 5\n", None, "condenser.type"),
    ("unknown type", '[condenser]\ntype = "magic"\n', None, "condenser.type"),
    ("unknown key", '[condenser]\ntype = "recent"\nmax_size = 3\n', None, "condenser.max_size"),
    ("unknown key on noop", '[condenser]\ntype = "noop"\nattention_window = 3\n', None,
     "condenser.attention_window"),
    ("wrong type", '[condenser]\ntype = "recent"\nmax_events = "ten"\n', None, "condenser.max_events"),
    ("bool for int", '[condenser]\ntype = "observation_masking"\nattention_window = true\n', None,
     "condenser.attention_window"),
    ("float for int", '[condenser]\ntype = "amortized"\nmax_size = 10.5\n', None, "condenser.max_size"),
    ("keep_first too large", '[condenser]\ntype = "amortized"\nmax_size = 10\nkeep_first = 5\n', None,
     "condenser.keep_first"),
    ("non-positive max_size", '[condenser]\ntype = "amortized"\nmax_size = 0\n', None, "condenser.max_size"),
    ("bad hard_fallback", '[condenser]\ntype = "amortized"\nhard_fallback = "pray"\n', None,
     "condenser.hard_fallback"),
    ("missing llm section", '[condenser]\ntype = "llm"\nllm_config = "nope"\n', None, "condenser.llm_config"),
    ("llm_config of wrong type", '[condenser]\ntype = "llm"\nllm_config = 3\n', None, "condenser.llm_config"),
    ("bad key in llm section", '[condenser]\ntype = "llm"\nllm_config = "x"\n[llm.x]\nmodel = "m"\ntemprature = 1\n',
     None, "llm.x.temprature"),
    ("llm section without model", '[condenser]\ntype = "llm"\nllm_config = "x"\n[llm.x]\napi_key = "k"\n',
     None, "llm.x.model"),
    ("condensers not an array", '[condenser]\ntype = "pipeline"\ncondensers = 3\n', None, "condenser.condensers"),
    ("pipeline entry without type", '[condenser]\ntype = "pipeline"\n[[condenser.condensers]]\nmax_size = 50\n',
     None, "condenser.condensers[0].type"),
    ("pipeline entry validation",
     '[condenser]\ntype = "pipeline"\n[[condenser.condensers]]\ntype = "noop"\n'
     '[[condenser.condensers]]\ntype = "amortized"\nmax_size = 0\n', None, "condenser.condensers[1].max_size"),
    ("pipeline entry unknown key",
     '[condenser]\ntype = "pipeline"\n[[condenser.condensers]]\ntype = "noop"\n'
     '[[condenser.condensers]]\ntype = "recent"\nmax_size = 10\n', None, "condenser.condensers[1].max_size"),
    ("nested pipeline entry",
     '[condenser]\ntype = "pipeline"\n[[condenser.condensers]]\ntype = "pipeline"\n'
     '[[condenser.condensers.condensers]]\ntype = "noop"\n'
     '[[condenser.condensers.condensers]]\ntype = "browser_output_masking"\nattention_window = 0\n', None,
     "condenser.condensers[0].condensers[1].attention_window"),
    ("nested missing llm section",
     '[condenser]\ntype = "pipeline"\n[[condenser.condensers]]\ntype = "llm"\nllm_config = "gone"\n', None,
     "condenser.condensers[0].llm_config"),
    ("named section missing", NAMED, "other", "condenser.other"),
    ("named section invalid", NAMED, "bad", "condenser.bad.keep_first"),
    ("no condenser section", LLM_SECTION, None, "[condenser]"),
    ("condenser not a table", 'condenser = "noop"\n', None, "condenser"),
]


@pytest.mark.parametrize("label, text, name, key", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_name_the_key(tmp_path, label, text, name, key):
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text, name)
    assert key in str(info.value), str(info.value)


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_condenser(tmp_path / "absent.toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_text(tmp_path, "[condenser\ntype = 'noop'\n")


def test_a_config_is_utf8_text_in_a_regular_file_of_at_most_a_megabyte(tmp_path):
    """TOML is UTF-8 whatever the locale says; what is not (Latin-1, a stray byte) is one
    ConfigError naming the file and the byte, never a UnicodeDecodeError. A FIFO or a device
    would be read forever: refused before reading."""
    good = '[condenser]\ntype = "noop"\n'
    latin = tmp_path / "latin1.toml"
    latin.write_bytes(('[condenser]\ntype = "noop" # caf\u00e9\n').encode("latin-1"))
    with pytest.raises(ConfigError) as info:
        load_condenser(latin)
    assert str(info.value) == f"config {latin}: not UTF-8 text (byte 0xe9 at offset 31); a TOML file is UTF-8"
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbf" + good.encode())  # as some editors save it
    assert isinstance(load_condenser(bom), condensers.NoOpCondenser)
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"fifo.toml: not a regular file \(it is a device, pipe or socket\)"):
        load_condenser(fifo)
    with pytest.raises(ConfigError, match=r"not a regular file \(it is a folder\)"):
        load_condenser(tmp_path)
    zero = tmp_path / "zero.toml"
    zero.symlink_to("/dev/zero")
    with pytest.raises(ConfigError, match="not a regular file"):
        load_condenser(zero)
    big = tmp_path / "big.toml"
    big.write_text(good + "#" * (1 << 20) + "\n")
    with pytest.raises(ConfigError, match="larger than the 1 MB"):
        load_condenser(big)
    with pytest.raises(ConfigError, match="cannot hold a NUL"):
        load_condenser(f"{tmp_path}/a\x00.toml")


# --- legacy §7.4 ----------------------------------------------------------------------------


def test_legacy_basic_recent(tmp_path):
    text = '[condenser]\ntype = "recent"\nkeep_first = 3\nmax_events = 15\n'
    built = load_text(tmp_path, text)
    assert isinstance(built, condensers.RecentEventsCondenser)
    assert (built.keep_first, built.max_events) == (3, 15)
    assert condenser_from_toml(tomllib.loads(text)) == built


def test_legacy_llm_reference(tmp_path):
    registered("llm")
    built = load_text(tmp_path, LLM_SECTION + """
[condenser]
type = "llm"
llm_config = "condenser_llm"
keep_first = 2
max_size = 50
""")
    assert type(built) is TYPES["llm"]
    assert built.llm_config.model == "gpt-4"
    assert (built.keep_first, built.max_size) == (2, 50)


def test_legacy_missing_llm_reference_is_an_error_not_noop(tmp_path):
    registered("llm")
    with pytest.raises(ConfigError, match=r"condenser\.llm_config.*missing_llm"):
        load_text(tmp_path, '[condenser]\ntype = "llm"\nllm_config = "missing_llm"\n')


def test_legacy_invalid_type_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match=r"condenser\.type.*invalid_type"):
        load_text(tmp_path, '[condenser]\ntype = "invalid_type"\n')


def test_legacy_validation_error_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match=r"condenser\.keep_first"):
        load_text(tmp_path, '[condenser]\ntype = "recent"\nkeep_first = -1\nmax_events = 0\n')


def test_named_llm_sections_inherit_the_base_llm_section(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(
        '[llm]\napi_key = "sk-base"\ntemperature = 0.2\n\n'
        '[llm.summarizer]\nmodel = "gpt-4o-mini"\ntemperature = 0.0\n\n'
        '[condenser]\ntype = "llm"\nllm_config = "summarizer"\n'
    )
    from openhands_memory.config import load_condenser

    llm = load_condenser(path).llm_config
    assert (llm.model, llm.api_key_value(), llm.temperature) == ("gpt-4o-mini", "sk-base", 0.0)


def test_llm_config_env_reads_the_environment(tmp_path, monkeypatch):
    from openhands_memory.config import condenser_from_toml
    from openhands_memory.errors import ConfigError

    section = {"condenser": {"type": "llm", "llm_config": "env"}}
    monkeypatch.delenv("OPENHANDS_MEMORY_LLM_MODEL", raising=False)
    monkeypatch.delenv("LLM_MODEL", raising=False)
    with pytest.raises(ConfigError, match="condenser.llm_config"):
        condenser_from_toml(section)
    monkeypatch.setenv("OPENHANDS_MEMORY_LLM_MODEL", "openai/test-model")
    monkeypatch.setenv("OPENHANDS_MEMORY_LLM_API_BASE", "http://127.0.0.1:9/v1")
    llm = condenser_from_toml(section).llm_config
    assert (llm.model, llm.api_base) == ("openai/test-model", "http://127.0.0.1:9/v1")


# --- aliases -----------------------------------------------------------------------------------


@pytest.mark.parametrize("alias, canonical", [
    ("recent_events", "recent"), ("amortized_forgetting", "amortized"),
    ("browser_output", "browser_output_masking"), ("structured_summary", "structured"),
])
def test_write_up_type_names_are_aliases(alias, canonical):
    from openhands_memory.config import condenser_from_toml

    condenser = condenser_from_toml({"condenser": {"type": alias}})
    assert condenser.type == canonical
    assert condenser.config()["type"] == canonical  # stored under OpenHands' own name
    nested = condenser_from_toml({"condenser": {"type": "pipeline", "condensers": [{"type": alias}]}})
    assert nested.condensers[0].type == canonical


def test_unknown_type_suggests_the_nearest_name():
    from openhands_memory.config import condenser_from_toml
    from openhands_memory.errors import ConfigError

    with pytest.raises(ConfigError, match=r"condenser.type 'recent_event' is not a condenser type; did you mean 'recent_events'\?"):
        condenser_from_toml({"condenser": {"type": "recent_event"}})
    with pytest.raises(ConfigError, match=r"is not a condenser type \(one of: amortized,"):
        condenser_from_toml({"condenser": {"type": "zzz"}})


# --- the whole message: one line naming the key, the value and the rule ---------------------

MESSAGES = [
    (('[condenser]\ntype = "pipeline"\n[[condenser.condensers]]\ntype = "noop"\n'
      '[[condenser.condensers]]\ntype = "amortized"\nmax_size = 0\n'),
     "condenser.condensers[1].max_size (0) must be at least 1"),  # the README's example
    ('[condenser]\ntype = "recent"\nmax_events = "ten"\n', "condenser.max_events ('ten') must be an integer"),
    ('[condenser]\ntype = "amortized"\nmax_size = 10.5\n', "condenser.max_size (10.5) must be an integer"),
    ('[condenser]\ntype = "observation_masking"\nattention_window = true\n',
     "condenser.attention_window (True) must be an integer"),
    ('[condenser]\ntype = "amortized"\nminimum_progress = 1.5\n', "condenser.minimum_progress (1.5) must be less than 1"),
    ('[condenser]\ntype = "llm"\nminimum_progress = nan\n', "condenser.minimum_progress (nan) must be a finite number"),
    ('[condenser]\ntype = "amortized"\nhard_fallback = "offline"\n',
     "condenser.hard_fallback ('offline') must be 'raise' or 'reset'"),
    ('[condenser]\ntype = "amortized"\nmax_size = 10\nkeep_first = 5\n',
     ("condenser.keep_first (5) leaves no room to condense: it must be less than max_size // 2 (5); "
      "lower keep_first or raise max_size")),
    ('[condenser]\ntype = "recent"\nkeep_first = 5\nmax_events = 5\n',
     "condenser.keep_first (5) must be less than max_events (5)"),
    ('[condenser]\ntype = "recent"\nmax_size = 3\n',
     "condenser.max_size is not a setting of type 'recent' (settings: keep_first, max_events)"),
    ('[condenser]\ntype = "amortized"\nmax_sise = 3\n',
     "condenser.max_sise is not a setting of type 'amortized'; did you mean 'max_size'?"),
    ('[condenser]\ntype = "llm"\nllm_config = { model = "m", timeout = 0 }\n',
     "condenser.llm_config.timeout (0) must be more than 0"),
    ('[condenser]\ntype = "llm"\nllm_config = "x"\n[llm.x]\nmodel = "m"\nbase_url = 3\n',
     "llm.x.base_url (3) must be a string"),
    ('[condenser]\ntype = "llm"\nllm_config = "x"\n[llm.x]\nmodel = "m"\nretry_min_wait = 5\nretry_max_wait = 1\n',
     "llm.x.retry_min_wait (5) must not exceed retry_max_wait (1)"),
]


@pytest.mark.parametrize("text, message", MESSAGES, ids=[m for _, m in MESSAGES])
def test_error_message_in_full(text, message):
    with pytest.raises(ConfigError) as info:
        condenser_from_toml(tomllib.loads(text))
    assert str(info.value) == message
