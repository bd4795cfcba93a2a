"""The price map litellm ships, read as JSON without importing litellm.

litellm carries ``model_prices_and_context_window_backup.json`` inside its package: each
model's prices per token, context window and provider. ``import litellm`` costs seconds (and
without ``LITELLM_LOCAL_MODEL_COST_MAP`` it fetches a newer map over the network), while the
file itself reads in tens of milliseconds. This module reads the file, never the network.

``entry(model)`` answers only for the names whose entry litellm's own lookup
(``litellm.get_model_info``) is known to return unchanged: a key of the map, or
``provider/key`` for a key of that provider, for the providers in ``DIRECT_PROVIDERS``
(``tests/test_llm_offline.py`` holds every such entry to litellm's answer). Any other name
(an alias, another letter case, a provider whose lookup has rules of its own) is None here,
and the caller asks litellm. So is every name when the installed litellm is not a release
these rules were checked against (``CHECKED_RELEASES``): its lookup may differ.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MAP_FILE = "model_prices_and_context_window_backup.json"

# The litellm releases whose lookup tests/test_llm_offline.py found to return every entry
# ``entry`` answers for unchanged. Another release may resolve names otherwise: it is asked.
CHECKED_RELEASES = frozenset({"1.105.3", "1.110.2"})

# Providers whose map entries litellm's lookup returns as the file has them. Others (Azure,
# Bedrock, Vertex, ...) go through per-provider rules, so litellm is asked for those.
DIRECT_PROVIDERS = frozenset({"openai", "text-completion-openai", "anthropic", "deepseek", "mistral", "xai",
                              "groq", "cohere_chat"})


@functools.cache
def litellm_folder() -> Path | None:
    """Where the installed litellm package lives, found without importing it; None if absent."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def litellm_release() -> str | None:
    """The installed litellm's version, read from its metadata (not by importing it)."""
    try:
        return importlib.metadata.version("litellm")
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def price_map() -> Mapping[str, Mapping[str, Any]]:
    """The map litellm ships (empty when litellm or its file is missing, or unreadable)."""
    folder = litellm_folder()
    if folder is None:
        return {}
    try:
        data = json.loads((folder / MAP_FILE).read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    data.pop("fallback_generalizations", None)  # rules for names the map lacks: litellm's to apply
    return _with_aliases({k: v for k, v in data.items() if isinstance(v, dict)})


def _with_aliases(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The map as litellm serves it: a row ``{"alias_of": NAME}`` is NAME's entry, and the
    names in a row's ``aliases`` list are more names for it (litellm's
    ``_expand_model_aliases``; a name that is taken already stays what it was)."""
    pointers = {name: row["alias_of"] for name, row in rows.items() if isinstance(row.get("alias_of"), str)}
    owners: dict[str, str] = {}
    listing: list[str] = []
    for name, row in rows.items():
        aliases = row.get("aliases")
        if aliases is None or name in pointers:
            continue
        listing.append(name)
        for alias in aliases if isinstance(aliases, list) else ():
            if isinstance(alias, str) and not (alias in rows and alias not in pointers) and alias not in owners:
                owners[alias] = name
    for alias, target in pointers.items():
        if target in rows and target not in pointers and alias not in owners:
            owners[alias] = target
    for name in listing:
        rows[name] = {k: v for k, v in rows[name].items() if k != "aliases"}
    for alias in pointers.keys() - owners.keys():  # points at nothing: dropped
        del rows[alias]
    for alias, owner in owners.items():
        rows[alias] = rows[owner]
    return rows


def models_of(provider: str) -> frozenset[str]:
    """The map's keys for ``provider`` (litellm's ``anthropic_models``, ``cohere_models``...)."""
    return _models_by_provider().get(provider, frozenset())


@functools.cache
def _models_by_provider() -> dict[str, frozenset[str]]:
    by: dict[str, set[str]] = {}
    for key, value in price_map().items():
        provider = value.get("litellm_provider")
        if isinstance(provider, str):
            by.setdefault(provider, set()).add(key)
    return {p: frozenset(keys) for p, keys in by.items()}


def openai_models() -> frozenset[str]:
    """litellm's ``open_ai_chat_completion_models``: the OpenAI provider's keys, but fine-tune
    price keys (``ft:gpt-4o``, one colon) that only price fine-tuned models."""
    return _openai_models()


@functools.cache
def _openai_models() -> frozenset[str]:
    return frozenset(k for k in models_of("openai") if not (k.startswith("ft:") and k.count(":") == 1))


def entry(model: str) -> Mapping[str, Any] | None:
    """The map's entry for ``model`` when litellm would return it unchanged, else None (ask
    litellm: the name is not in the map as written, or its provider has lookup rules)."""
    if litellm_release() not in CHECKED_RELEASES:
        return None
    if model in price_map():  # litellm tries the name as written first
        return _direct(model)
    if "/" not in model:
        return None
    provider, rest = model.split("/", 1)
    found = _direct(rest)
    return found if found is not None and found.get("litellm_provider") == provider else None


def _direct(name: str) -> Mapping[str, Any] | None:
    value = price_map().get(name)
    if value is None or value.get("litellm_provider") not in DIRECT_PROVIDERS:
        return None
    return value


def number(info: Mapping[str, Any], key: str) -> float | None:
    value = info.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
