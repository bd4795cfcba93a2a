"""OpenHands-style TOML configuration for condensers.

    [condenser]
    type = "pipeline"

    [[condenser.condensers]]
    type = "conversation_window"

    [[condenser.condensers]]
    type = "llm"
    llm_config = "summarizer"      # resolves [llm.summarizer]; an inline table works too;
                                   # "env" reads OPENHANDS_MEMORY_LLM_MODEL / _API_BASE / _API_KEY
    keep_first = 4
    max_size = 120

    [llm.summarizer]
    model = "gpt-4o-mini"

Unlike OpenHands, a bad section is an error naming the key, never a silent NoOp; and
``llm_config`` names resolve for every LLM strategy, nested pipelines included.

Any strategy also takes pin rules (``view/pins.py``), which OpenHands does not know:

    [[condenser.pins]]
    tool = "task_tracker"          # the latest task list, shown again after every summary
    mode = "reinject"

    [[condenser.pins]]
    first_user_message = true      # the task as first given is never forgotten

and ``pin_budget`` (default 0.5): the share of the strategy's token limit pins may take.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any, Mapping

from .errors import ConfigError
from .llm import LLMConfig
from .settings import InvalidSetting
from .view.pins import DEFAULT_PIN_BUDGET, PinRule


def condenser_types() -> dict[str, type]:
    from .condensers import CONDENSER_TYPES

    return CONDENSER_TYPES


# Names a widely read write-up of OpenHands' condensers uses (they are the module names, in
# OpenHands and here), accepted beside OpenHands' own config ``type`` names.
TYPE_ALIASES = {
    "recent_events": "recent",
    "amortized_forgetting": "amortized",
    "browser_output": "browser_output_masking",
    "structured_summary": "structured",
    "llm_summarizing": "llm",
    "no_op": "noop",
}


def resolve_type(kind: Any, where: str) -> type:
    """The condenser class a ``type`` names (an OpenHands name or an alias); an unknown one
    is an error suggesting the nearest name."""
    import difflib

    types = condenser_types()
    label = "--type" if where == "--type" else f"{where}.type"
    if not isinstance(kind, str):
        raise ConfigError(f"{label} must be a string, not {type(kind).__name__}")
    cls = types.get(TYPE_ALIASES.get(kind, kind))
    if cls is not None:
        return cls
    names = sorted(set(types) | set(TYPE_ALIASES))
    close = difflib.get_close_matches(kind, names, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else f" (one of: {', '.join(sorted(types))})"
    raise ConfigError(f"{label} {kind!r} is not a condenser type{hint}")


def _llm(value: Any, where: str, llms: Mapping[str, Any]) -> LLMConfig:
    if value == "env" and "env" not in llms:
        config = LLMConfig.from_env()
        if config is None:
            raise ConfigError(
                f'{where}.llm_config = "env" but no model is set in the environment '
                "(OPENHANDS_MEMORY_LLM_MODEL or LLM_MODEL)"
            )
        return config
    if isinstance(value, str):
        if value not in llms:
            known = ", ".join(sorted(llms)) or "none"
            raise ConfigError(f"{where}.llm_config names [llm.{value}], which is not defined (defined: {known})")
        return LLMConfig.from_mapping(value, llms[value])
    if isinstance(value, Mapping):
        return LLMConfig.from_mapping("llm_config", value, where=f"{where}.llm_config")
    raise ConfigError(f"{where}.llm_config must be the name of an [llm.NAME] section or a table")


def condenser_from_section(section: Any, llms: Mapping[str, Any], where: str = "condenser"):
    """Build the condenser one TOML table describes; errors name ``where.key``."""
    if not isinstance(section, Mapping):
        raise ConfigError(f"{where} must be a table")
    types = condenser_types()
    kind = section.get("type")
    if kind is None:
        raise ConfigError(f"{where}.type is missing (one of: {', '.join(sorted(types))})")
    cls = resolve_type(kind, where)
    settings = {f.name for f in dataclasses.fields(cls) if f.init}
    values: dict[str, Any] = {}
    rules: tuple[PinRule, ...] = ()
    budget = DEFAULT_PIN_BUDGET
    for key, value in section.items():
        if key == "type":
            continue
        if key == "pins":  # pin rules: every strategy takes them (``view/pins.py``)
            rules = _pin_rules(value, where)
            continue
        if key == "pin_budget":
            budget = _pin_budget(value, where)
            continue
        # Two settings are tables in the file and objects in Python; the rest are checked,
        # unknown keys included, by the condenser itself.
        if key == "llm_config" and key in settings:
            value = _llm(value, where, llms)
        elif key == "condensers" and key in settings:
            if not isinstance(value, list):
                raise ConfigError(f"{where}.condensers must be an array of tables ([[{where}.condensers]])")
            value = [condenser_from_section(item, llms, f"{where}.condensers[{i}]") for i, item in enumerate(value)]
        values[key] = value
    try:
        made = cls(**values)
    except InvalidSetting as e:
        raise e.at(where) from None
    return made.with_pins(rules, budget) if rules or budget != DEFAULT_PIN_BUDGET else made


def _pin_rules(value: Any, where: str) -> tuple[PinRule, ...]:
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise ConfigError(f"{where}.pins must be an array of tables ([[{where}.pins]])")
    rules = []
    for i, item in enumerate(value):
        try:
            rules.append(PinRule(**item))
        except InvalidSetting as e:  # an unknown key too
            raise e.at(f"{where}.pins[{i}]") from None
    return tuple(rules)


def _pin_budget(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ConfigError(f"{where}.pin_budget must be a share of the context window, above 0 and at most 1 "
                          f"(got {value!r})")
    return float(value)


def llm_sections(data: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Every ``[llm.NAME]`` section, each inheriting the settings of the base ``[llm]`` it does
    not set itself, as OpenHands reads them; the base itself is available as ``llm``."""
    root = data.get("llm") or {}
    if not isinstance(root, Mapping):
        raise ConfigError("llm must be a table")
    base = {k: v for k, v in root.items() if not isinstance(v, Mapping)}
    sections: dict[str, Mapping[str, Any]] = {"llm": base} if base else {}
    for name, section in root.items():
        if isinstance(section, Mapping):
            sections[name] = {**base, **section}
    return sections


def condenser_from_toml(data: Mapping[str, Any], name: str | None = None):
    """The ``[condenser]`` section of a parsed TOML document, or ``[condenser.NAME]``."""
    llms = llm_sections(data)
    if "condenser" not in data:
        raise ConfigError("the configuration has no [condenser] section")
    section = data["condenser"]
    if name is not None:
        if not isinstance(section, Mapping) or name not in section:
            raise ConfigError(f"the configuration has no [condenser.{name}] section")
        return condenser_from_section(section[name], llms, f"condenser.{name}")
    return condenser_from_section(section, llms)


MAX_CONFIG_BYTES = 1 << 20  # a config.toml is a few KB; more is not one


def read_config(path: str | Path) -> str:
    """The text of the config file at ``path``: a regular file (a FIFO or a device could be
    read forever) of UTF-8, as TOML is, whatever the locale says; ``ConfigError`` otherwise."""
    from .io.common import ImportFailed, read_bounded

    try:
        data = read_bounded(path, MAX_CONFIG_BYTES)
    except ImportFailed as e:
        raise ConfigError(f"config {e.where}: {e.what}") from None
    except ValueError:  # a NUL in the path
        raise ConfigError(f"config {path!r}: a path cannot hold a NUL character") from None
    try:
        return data.decode("utf-8-sig")  # an editor's byte-order mark is no fault
    except UnicodeDecodeError as e:
        raise ConfigError(f"config {path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
                          "a TOML file is UTF-8") from None


def load_condenser(path: str | Path, name: str | None = None):
    text = read_config(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path} is not valid TOML: {e}") from None
    return condenser_from_toml(data, name)
