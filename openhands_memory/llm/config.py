"""How to reach one model (:class:`LLMConfig`), from Python, an OpenHands ``[llm.NAME]``
table or the environment."""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, SecretStr, model_validator

from ..errors import ConfigError
from ..settings import InvalidSetting, SettingError, settings

# Keys an OpenHands ``[llm.NAME]`` table may carry that do not affect this library.
# They are accepted so an existing OpenHands config.toml loads unchanged.
_IGNORED_OPENHANDS_KEYS = frozenset(
    {
        "api_version",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_region_name",
        "openrouter_site_url",
        "openrouter_app_name",
        "retry_multiplier",
        "max_message_chars",
        "top_p",
        "top_k",
        "input_cost_per_token",
        "output_cost_per_token",
        "ollama_base_url",
        "drop_params",
        "modify_params",
        "disable_vision",
        "disable_stop_word",
        "caching_prompt",
        "log_completions",
        "log_completions_folder",
        "custom_tokenizer",
        "native_tool_calling",
        "reasoning_effort",
        "seed",
        "safety_settings",
        "for_routing",
        "correct_num",
        "completion_kwargs",
        "embedding_model",
        "embedding_base_url",
        "embedding_deployment_name",
        "usage_id",
        "service_id",
        "stream",
        "extended_thinking_budget",
    }
)

_ENV_FALLBACKS = {
    "model": ("OPENHANDS_MEMORY_LLM_MODEL", "LLM_MODEL"),
    "api_base": ("OPENHANDS_MEMORY_LLM_API_BASE", "LLM_BASE_URL"),
    "api_key": ("OPENHANDS_MEMORY_LLM_API_KEY", "LLM_API_KEY"),
}


def _model_name(value: str) -> str:
    if not value.strip():
        raise ValueError("must be a non-empty model name such as 'openai/gpt-4o'")
    return value


# `api_key = ""` in a TOML file means "not set".
OptionalText = Annotated[str | None, AfterValidator(lambda value: value or None)]
# The key is a SecretStr: it shows as '**********' in every repr, log line and traceback, and
# only ``api_key_value()`` (the one place that hands it to litellm) reads it.
OptionalSecret = Annotated[SecretStr | None, BeforeValidator(lambda value: value or None)]


@settings("LLMConfig", subject="LLMConfig", frozen=True)
class LLMConfig:
    """How to reach one model. Times are in seconds."""

    model: Annotated[str, AfterValidator(_model_name)]
    api_base: OptionalText = None
    api_key: OptionalSecret = None
    timeout: Annotated[float, Field(gt=0)] = 60.0
    num_retries: Annotated[int, Field(ge=0)] = 3
    retry_min_wait: Annotated[float, Field(ge=0)] = 1.0
    retry_max_wait: Annotated[float, Field(ge=0)] = 20.0
    temperature: Annotated[float, Field(ge=0)] | None = None
    max_output_tokens: Annotated[int, Field(ge=1)] | None = None
    custom_llm_provider: OptionalText = None
    max_input_tokens: Annotated[int, Field(ge=1)] | None = None

    @model_validator(mode="after")
    def _waits_in_order(self) -> LLMConfig:
        if self.retry_min_wait > self.retry_max_wait:
            raise SettingError(
                "retry_min_wait",
                f"({self.retry_min_wait:g}) must not exceed retry_max_wait ({self.retry_max_wait:g})",
            )
        return self

    def api_key_value(self) -> str | None:
        """The key itself, for the request to the model (nowhere else)."""
        return None if self.api_key is None else self.api_key.get_secret_value()

    @classmethod
    def from_mapping(cls, name: str, data: Mapping[str, Any], *, where: str | None = None) -> LLMConfig:
        """Build from an OpenHands-style ``[llm.NAME]`` TOML table (or one at ``where``,
        such as an inline ``condenser.llm_config``).

        Settings OpenHands knows but this library does not use are ignored; any other key
        is almost certainly a typo and raises ``ConfigError`` naming ``llm.NAME.key``.
        """
        prefix = where or f"llm.{name}"
        if not isinstance(data, Mapping):
            raise ConfigError(f"{prefix} must be a table, got {type(data).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        spelled: dict[str, str] = {}  # setting -> the key the table used for it
        for key, value in data.items():
            target = "api_base" if key == "base_url" else key
            if target in known:
                if target in values and values[target] != value:
                    raise ConfigError(
                        f"{prefix}.{key}: both base_url and api_base are set and differ; keep one"
                    )
                values[target], spelled[target] = value, key
            elif key not in _IGNORED_OPENHANDS_KEYS:
                raise ConfigError(_unknown_key_message(prefix, key, known))
        if "model" not in values:
            raise ConfigError(f"{prefix}.model is required (for example model = \"openai/gpt-4o\")")
        try:
            return cls(**values)
        except InvalidSetting as e:
            raise e.at(prefix, spelled.get(e.key)) from None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LLMConfig | None:
        """Read ``OPENHANDS_MEMORY_LLM_*`` (falling back to ``LLM_*``); None if no model is set."""
        env = os.environ if environ is None else environ
        values: dict[str, str] = {}
        for key, names in _ENV_FALLBACKS.items():
            for env_name in names:
                if env.get(env_name):
                    values[key] = env[env_name]
                    break
        if "model" not in values:
            return None
        return cls(**values)


def _unknown_key_message(prefix: str, key: str, known: set[str]) -> str:
    candidates = sorted(known | {"base_url"} | _IGNORED_OPENHANDS_KEYS)
    close = difflib.get_close_matches(str(key), candidates, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{prefix}.{key} is not a known LLM setting{hint}"
