"""The command-line tool run in-process: the one way the test modules run it.

``invoke`` gives click's result whatever the exit status (the test looks at it itself);
``run`` asserts the exit status first, and that a failure is a message, not a traceback.
An exception escaping a command is raised in the test, with its traceback, unless the test
asks for it as the result (``catch_exceptions=True``: the hostile-input suites report it with
the input that caused it). Both pass ``ENV`` under ``env``: 80 columns, so wrapping is what a
terminal shows, and litellm's bundled price map, so nothing reaches for the network.
"""

from __future__ import annotations

from collections.abc import Mapping

from click.testing import CliRunner, Result

from openhands_memory.cli import cli

ENV: dict[str, str] = {"COLUMNS": "80", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}

#: The model settings a user's environment may hold, unset for the run (``None`` unsets).
NO_MODEL_SETTINGS: dict[str, str | None] = {
    "OPENHANDS_MEMORY_LLM_MODEL": None, "OPENHANDS_MEMORY_LLM_API_BASE": None, "OPENHANDS_MEMORY_LLM_API_KEY": None,
}


def invoke(*args: object, input: str | bytes | None = None, env: Mapping[str, str | None] | None = None,
           color: bool = False, catch_exceptions: bool = False) -> Result:
    """``openhands-memory ARGS...``, each argument as ``str``."""
    return CliRunner().invoke(cli, [str(a) for a in args], input=input, env={**ENV, **(env or {})},
                              color=color, catch_exceptions=catch_exceptions)


def run(*args: object, code: int = 0, input: str | bytes | None = None,
        env: Mapping[str, str | None] | None = None, color: bool = False) -> Result:
    """``invoke`` that must exit with ``code``."""
    result = invoke(*args, input=input, env=env, color=color)
    assert result.exit_code == code, f"exit {result.exit_code}, wanted {code}:\n{result.output}"
    if code:
        assert "Traceback" not in result.output
    return result
