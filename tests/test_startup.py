"""What a command imports before it does its work: nothing it does not use.

Each check runs the command line in a fresh process and reads the modules it had loaded when
it exited (speed is bench/startup.py's to measure; these hold the behaviour that gives it):
``--version`` and ``--help`` build no pydantic model and open no storage module; no command's
``--help`` loads the storage, the events or litellm; ``view`` and ``replay --model gpt-4o``
(tokens by gpt-4o's tokenizer, priced as gpt-4o) run without litellm; and a model call to a
server that is not listening fails as a connection_error without importing it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import openhands_memory
from openhands_memory.cli import COMMANDS
from openhands_memory.conversation import EventStore

from . import factories as f

REPO = Path(__file__).resolve().parent.parent

# Runs the command line, then writes the names of the loaded modules to a file at exit.
PROBE = """\
import atexit, json, sys
out, argvs = sys.argv[1], json.loads(sys.argv[2])
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
from openhands_memory.cli import cli
for argv in argvs:
    try:
        cli.main(args=argv, prog_name="openhands-memory", standalone_mode=False)
    except SystemExit:
        pass
"""

HEAVY = ("litellm", "tiktoken", "sqlalchemy", "alembic", "pydantic.main", "msgspec", "openhands_memory.events",
         "openhands_memory.storage", "openhands_memory.conversation", "openhands_memory.condensers")


def loaded_after(tmp_path: Path, *argvs: list[str]) -> set[str]:
    """The modules one process had loaded after running each of ``argvs`` in turn."""
    out = tmp_path / "modules.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "80"}
    env.pop("LITELLM_LOCAL_MODEL_COST_MAP", None)
    done = subprocess.run([sys.executable, "-c", PROBE, str(out), json.dumps(argvs)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return set(json.loads(out.read_text()))


def top(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return [n for n in names if n in modules]


def test_version_and_help_load_no_model_no_storage(tmp_path):
    loaded = loaded_after(tmp_path, ["--version"], ["--help"])
    assert top(loaded, HEAVY) == []
    assert "pydantic" not in loaded


def test_no_commands_help_loads_storage_events_or_litellm(tmp_path):
    loaded = loaded_after(tmp_path, *[[name, "--help"] for name in COMMANDS])
    assert {f"openhands_memory.cli.{module}" for module, *_ in COMMANDS.values()} <= loaded
    assert top(loaded, HEAVY) == []


def test_importing_the_package_loads_nothing_it_names(tmp_path):
    code = "import sys, openhands_memory; print(sorted(m for m in sys.modules if m.startswith(('openhands_memory', 'pydantic'))))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.stdout.strip() == "['openhands_memory']"


def test_the_package_names_resolve_to_their_modules_objects():
    import openhands_memory.chat as chat
    import openhands_memory.conversation as conversation
    import openhands_memory.errors as errors
    import openhands_memory.events as events
    import openhands_memory.view as view

    assert set(openhands_memory._EXPORTS) == set(openhands_memory.__all__)
    homes = {".errors": errors, ".events": events, ".conversation": conversation, ".view": view, ".chat": chat}
    for name, module in openhands_memory._EXPORTS.items():
        assert getattr(openhands_memory, name) is getattr(homes[module], name), name
    assert set(openhands_memory.__all__) <= set(dir(openhands_memory))
    with pytest.raises(AttributeError, match="no attribute 'NoSuchName'"):
        openhands_memory.NoSuchName  # noqa: B018


def test_doctors_help_shows_the_librarys_default():
    from openhands_memory.cli import commands_doctor
    from openhands_memory.inspection import doctor

    assert commands_doctor.DEFAULT_MIN_AGE == doctor.DEFAULT_MIN_AGE


@pytest.fixture
def recorded(tmp_path) -> Path:
    db = tmp_path / "agent.db"
    with EventStore(db) as store:
        events = [f.system(), f.user("fix the date parser")]
        for i in range(6):
            events += [f.action(f"r{i}", f"call{i}"), f.observation(f"call{i}")]
        store.create_conversation("c").append_many(events)
    return db


def test_view_and_replay_with_a_model_never_import_litellm(tmp_path, recorded):
    loaded = loaded_after(tmp_path, ["view", str(recorded), "c"],
                          ["replay", str(recorded), "c", "--model", "gpt-4o", "--json"])
    assert "litellm" not in loaded
    assert "tiktoken" in loaded  # gpt-4o's tokenizer counted the tokens


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_model_call_to_a_server_not_listening_fails_without_litellm():
    base = f"http://127.0.0.1:{_closed_port()}/v1"
    code = f"""
import sys
from openhands_memory.llm import LLMConfig, LLMError, complete
config = LLMConfig(model="openai/test-model", api_base="{base}", api_key="sk-test", timeout=10, num_retries=2,
                   retry_min_wait=0.01, retry_max_wait=0.02)
try:
    complete(config, [{{"role": "user", "content": "hi"}}])
except LLMError as e:
    print(e.kind, e.call.attempts, e.target, "litellm" in sys.modules)
    print(e.call.error)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    first, second = done.stdout.splitlines()
    assert first == f"connection_error 3 {base} False"
    assert second.startswith(f"could not connect to {base}: ") and "refused" in second
