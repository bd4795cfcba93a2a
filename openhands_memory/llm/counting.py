"""Token counts as litellm's ``token_counter`` makes them, without importing litellm.

litellm counts with tiktoken (the model's OpenAI encoding, cl100k_base for most other
models), or for a few families with a Hugging Face tokenizer; a list of messages adds 3
tokens a message, 1 a name, and 3 that prime the reply. This module does the same where it
can do it exactly and offline:

* the tiktoken encodings litellm ships (``litellm/litellm_core_utils/tokenizers``), loaded
  from those files and never downloaded (one that is not there is ``TokenizerUnavailable``);
* the Anthropic and DeepSeek tokenizers litellm ships, through ``tokenizers``;
* messages whose content is text (strings, text and thinking blocks) and tool calls.

Anything else (an image or a document to count, tool definitions, a tokenizer litellm would
download from Hugging Face) is None here: the caller asks litellm. The rules below follow
litellm's ``litellm_core_utils/token_counter.py`` and ``utils.py``, name for name, as they
are in the releases in ``CHECKED_RELEASES``; ``tests/test_llm_offline.py`` holds the counts
to litellm's for many models and texts. Another release's rules may differ (they change from
one release to the next), so with it installed litellm counts.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .errors import TokenizerUnavailable
from .price_map import litellm_folder, litellm_release, models_of, openai_models, price_map

TextCounter = Callable[[str], int]

TOKENIZERS = "litellm_core_utils/tokenizers"  # inside the litellm package

# The file each encoding is read from, and the SHA-256 tiktoken expects of it: a file that
# does not match is refused here, where tiktoken would delete it and download another.
_FILES = {
    "cl100k_base": ("cl100k_base", "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
    "o200k_base": ("o200k_base", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
    "o200k_harmony": ("o200k_base", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
    "p50k_base": ("p50k_base", "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"),
    "p50k_edit": ("p50k_base", "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"),
    "r50k_base": ("r50k_base", "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"),
}
_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"  # tiktoken's cache key
_BUNDLED_HF = {"anthropic": "anthropic_tokenizer.json", "deepseek": "deepseek_tokenizer.json"}

# litellm's names for the rules it counts by (constants.py, __init__.py, token_counter.py).
_AZURE_LLMS = frozenset({"gpt-35-turbo", "gpt-35-turbo-instruct", "azure/gpt-41", "azure/gpt-41-mini",
                         "azure/gpt-41-nano"})
_CHAT_MODES = frozenset({"chat", "responses"})
_TEXT_MODES = frozenset({"chat", "completion", "responses", "realtime"})
_VERSIONED = re.compile(r"(?:gpt-(?:[5-9]|[1-9]\d+)|o[1-9]\d*)(?:[.-]|$)")
_DEEPSEEK = re.compile(
    r"deepseek[-_.](?:chat[-_.])?v[34]|(?:^|/)deepseek-(?:chat|reasoner|flash)(?::free)?$", re.IGNORECASE
)
_TEXT_FIELDS = {"text": "text", "thinking": "thinking", "redacted_thinking": "thinking", "compaction": "content"}
_REPLY_PRIMER = 3

# The litellm releases these rules were checked against (tests/test_llm_offline.py).
CHECKED_RELEASES = frozenset({"1.110.2"})
_SAMPLES = 16

_load_lock = threading.Lock()


# --- which tokenizer -----------------------------------------------------------------------


def huggingface_kind(model: str) -> str | None:
    """litellm's ``huggingface_tokenizer_kind``: the Hugging Face tokenizer it counts
    ``model`` with, or None for tiktoken."""
    if model in models_of("cohere") and "command-r" in model:
        return "cohere"
    if model in models_of("anthropic") and "claude-3" not in model:
        return "anthropic"
    if _DEEPSEEK.search(model):
        return "deepseek"
    lowered = model.lower()
    if "llama-2" in lowered or "replicate" in lowered:
        return "llama2"
    if "llama-3" in lowered:
        return "llama3"
    return None


def _tiktoken_name(model: str) -> str | None:
    import tiktoken

    try:
        return tiktoken.encoding_name_for_model(model)
    except KeyError:
        return None


def _fix_model_name(model: str) -> str:
    if model in _AZURE_LLMS:
        return model.replace("-35", "-3.5")
    return model if model in openai_models() else "gpt-3.5-turbo"


def _deployment_name(model: str) -> str:
    name = model.rpartition("/")[2]
    return name.split(":")[1] if name.startswith("ft:") else name


def _cost_entry(model: str) -> Mapping[str, Any]:
    return price_map().get(model) or {}


def _is_openai_model_name(name: str) -> bool:
    listed = openai_models()
    return (name in listed or _tiktoken_name(name) is not None
            or any(name.startswith(f"{m}-") or m.startswith(f"{name}-") for m in listed))


def _is_openai_cost_map_model(model: str) -> bool:
    if model in _AZURE_LLMS or model in openai_models():
        return True
    info = _cost_entry(model)
    return (info.get("litellm_provider") == "azure" and info.get("mode") in _TEXT_MODES
            and _is_openai_model_name(model.rsplit("/", 1)[-1]))


def _is_azure_openai_chat_model(model: str) -> bool:
    name = _deployment_name(model)
    info = _cost_entry(f"azure/{name}")
    return (info.get("litellm_provider") == "azure" and info.get("mode") in _CHAT_MODES
            and (info.get("supports_pdf_input") is True or name.startswith("gpt-")))


def _openai_model_name(model: str) -> str | None:
    segments = model.split("/")
    suffixes = ["/".join(segments[i:]) for i in range(len(segments))]
    if any(_is_openai_cost_map_model(s) or _is_openai_cost_map_model(f"azure/{s}") for s in suffixes):
        return segments[-1]
    last = model.rsplit("/", 1)[-1]
    if _tiktoken_name(last) == "o200k_base" or _VERSIONED.match(last):
        return last
    return _deployment_name(model) if _is_azure_openai_chat_model(model) else None


def _is_listed_non_chat_model(model: str) -> bool:
    modes = (_cost_entry(name).get("mode") for name in (model, f"azure/{model}"))
    return any(mode is not None and mode not in _CHAT_MODES for mode in modes)


@functools.lru_cache(maxsize=256)
def encoding_name(model: str) -> str:
    """litellm's ``openai_tokenizer_encoding_name``: the tiktoken encoding it counts with."""
    from tiktoken.model import MODEL_TO_ENCODING

    name = _openai_model_name(model) or _fix_model_name(model)
    if "gpt-4o" in name:
        return "o200k_base"
    found = _tiktoken_name(name)
    if found is not None:
        return found
    known = [m for m in MODEL_TO_ENCODING if name.startswith(f"{m}-")]
    if known:
        return MODEL_TO_ENCODING[max(known, key=len)]
    return "cl100k_base" if _is_listed_non_chat_model(name) else "o200k_base"


# --- loading what litellm ships ----------------------------------------------------------


@functools.cache
def encoding(name: str) -> Any:
    """The tiktoken encoding ``name``, from litellm's copy of its file (never downloaded).

    Raises ``LookupError`` saying why when that file is not there as tiktoken expects it."""
    import tiktoken

    folder = litellm_folder()
    base, digest = _FILES.get(name, (name, None))
    if folder is None or digest is None:
        raise LookupError(f"litellm ships no file for the tiktoken encoding {name}")
    cache = folder / TOKENIZERS
    path = cache / hashlib.sha1(_URL.format(base).encode()).hexdigest()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LookupError(f"{name}: {path}: {exc.strerror or exc}") from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise LookupError(f"{name}: {path} is not the encoding's file (its checksum differs)")
    # tiktoken reads its cache folder from the environment when it loads an encoding: point it
    # at litellm's copies (as litellm itself does) for this load only, then put it back.
    with _load_lock:
        saved = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
        try:
            return tiktoken.get_encoding(name)
        finally:
            if saved is None:
                del os.environ["TIKTOKEN_CACHE_DIR"]
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = saved


@functools.cache
def _huggingface(kind: str) -> Any | None:
    """The bundled Hugging Face tokenizer ``kind``; None when ``tokenizers`` is missing."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    folder = litellm_folder()
    if folder is None:
        return None
    try:
        return Tokenizer.from_file(str(folder / TOKENIZERS / _BUNDLED_HF[kind]))
    except Exception:  # noqa: BLE001 - litellm then counts with tiktoken: let it say so
        return None


# --- counting ------------------------------------------------------------------------------


def _env_int(name: str, default: int, low: int, high: int) -> int:
    """litellm's ``get_env_int_in_range``: the variable when it is a whole number in range."""
    raw = os.environ.get(name, "").strip()
    try:
        value = int(raw) if raw else default
    except ValueError:
        value = default
    return value if low <= value <= high else default


def _tiktoken_counter(enc: Any) -> TextCounter:
    # litellm encodes in pieces of 1,024 characters (tiktoken's merge loop is quadratic in a
    # long run of one character), so a count is the sum of its pieces' counts.
    size = _env_int("TIKTOKEN_ENCODE_CHUNK_SIZE_CHARS", 1024, 1, 4096)

    def count(text: str) -> int:
        return sum(len(enc.encode(text[i:i + size], disallowed_special=())) for i in range(0, len(text), size))

    return count


def _extrapolating(exact: TextCounter) -> TextCounter:
    # Past this many characters litellm counts 16 evenly spaced samples and scales up.
    most = _env_int("TOKEN_COUNTER_MAX_EXACT_CHARS", 4_000_000, 1, 1_000_000_000)

    def count(text: str) -> int:
        if len(text) <= most:
            return exact(text)
        samples_n = min(_SAMPLES, most)
        width = most // samples_n
        last = len(text) - width
        samples = [text[s:s + width] for s in (last * k // max(samples_n - 1, 1) for k in range(samples_n))]
        return round(sum(exact(s) for s in samples) * len(text) / sum(len(s) for s in samples))

    return count


@functools.lru_cache(maxsize=64)
def text_counter(model: str) -> TextCounter | None:
    """litellm's count of a text for ``model``, or None when litellm must count it."""
    if litellm_release() not in CHECKED_RELEASES:
        return None
    kind = huggingface_kind(model)
    if kind in _BUNDLED_HF:
        tokenizer = _huggingface(kind)
        if tokenizer is None:
            return None
        return _extrapolating(lambda text: len(tokenizer.encode_batch_fast([text])[0]))
    offline = os.environ.get("LITELLM_OFFLINE_MODE", "").strip().lower() == "true"
    if kind is not None and not offline:  # litellm would fetch this tokenizer from Hugging Face
        return None
    try:
        enc = encoding(encoding_name(model))
    except LookupError as exc:  # never downloaded: say which file is missing
        raise TokenizerUnavailable(model, str(exc)) from None
    return _extrapolating(_tiktoken_counter(enc))


class _Unsupported(Exception):
    """A message part this module does not count: litellm counts the whole list."""


def _content(count: TextCounter, parts: list[Any]) -> int:
    total = 0
    for part in parts:
        if isinstance(part, str):
            total += count(part)
        elif isinstance(part, Mapping) and part.get("type") in _TEXT_FIELDS:
            text = str(part.get(_TEXT_FIELDS[part["type"]]) or "")
            total += count(text) if text else 0
        else:  # an image, a document, a file, a tool block: litellm's own rules
            raise _Unsupported
    return total


def _tool_calls(count: TextCounter, key: str, value: Any) -> int:
    calls = value if key == "tool_calls" else [{"function": value}]
    if not isinstance(calls, list):
        raise _Unsupported
    total = 0
    for call in calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping):
            raise _Unsupported
        total += count(str(function.get("arguments", "")))
    return total


def count_messages(model: str, messages: Sequence[Any]) -> int | None:
    """litellm's ``token_counter(model, messages=...)`` without tools, or None when litellm
    must count them (a part this module does not count, or a tokenizer it does not have)."""
    count = text_counter(model)
    if count is None:
        return None
    legacy = _fix_model_name(model) == "gpt-3.5-turbo-0301"
    per_message, per_name = (4, -1) if legacy else (3, 1)
    total = 0
    try:
        for message in messages:
            if not isinstance(message, Mapping):
                return None
            total += per_message
            for key, value in message.items():
                if value is None:
                    continue
                if key in ("tool_calls", "function_call"):
                    total += _tool_calls(count, key, value)
                elif isinstance(value, str):
                    total += count(value) + (per_name if key == "name" else 0)
                elif key == "content" and isinstance(value, list):
                    total += _content(count, value)
                elif key == "provider_specific_fields" or (key == "search_results" and isinstance(value, list)):
                    return None
    except _Unsupported:
        return None
    return total + _REPLY_PRIMER
