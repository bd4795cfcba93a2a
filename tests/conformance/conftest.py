"""The real OpenHands SDK, run once per session in its own Python (>= 3.12) environment.

Where it is found: ``$OHM_SDK_VENV`` (a virtual environment's folder), else ``.venv-sdk/`` at
the repository's root (``.ci/run`` creates it from ``tests/conformance/requirements.txt``).
Without it the suite is skipped, saying why, unless ``OHM_REQUIRE_SDK=1`` (set by ``.ci/run``),
which makes a missing SDK a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from openhands_memory.conversation import EventStore

from ..sdk_env import sdk_python, sdk_venv
from . import exports
from .trajectories import CONFIGS, all_cases

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
RUNNER = HERE / "sdk_runner.py"
PINNED = "1.58."
SAVE_DIR = "observations"  # relative: the runner writes saved outputs under its own cwd

CASES = all_cases(SAVE_DIR)


@pytest.fixture(scope="session")
def sdk(tmp_path_factory) -> dict:
    """The SDK's answers for every case: {"switches": ..., "cases": {id: ...}}."""
    python = sdk_python()
    if python is None:
        message = (
            f"no OpenHands SDK environment at {sdk_venv()}: create it with "
            f"`python3.12 -m venv .venv-sdk && .venv-sdk/bin/pip install -r tests/conformance/requirements.txt` "
            f"(or point OHM_SDK_VENV at one)"
        )
        if os.environ.get("OHM_REQUIRE_SDK") == "1":
            pytest.fail(message + "; OHM_REQUIRE_SDK=1 says the conformance suite must run")
        pytest.skip(message)
    cwd = tmp_path_factory.mktemp("sdk-runner")
    store = EventStore(cwd / "exports.db")
    export_cases, conversations = exports.build(store, cwd, SAVE_DIR)
    for case in export_cases:
        case["configs"] = list(CONFIGS)
    request = json.dumps({"configs": CONFIGS, "cases": CASES + export_cases})
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENHANDS_SUPPRESS_BANNER": "1",
           "PYTHONPATH": "", "NO_PROXY": "*"}
    done = subprocess.run([str(python), str(RUNNER)], input=request, capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=900)
    if done.returncode != 0:
        pytest.fail(f"the SDK runner failed ({done.returncode}):\n{done.stderr[-4000:]}")
    out = json.loads(done.stdout)
    assert out["sdk_version"].startswith(PINNED), f"conformance is pinned to SDK {PINNED}x, found {out['sdk_version']}"
    out["exported"] = conversations  # the original conversations of the export cases
    yield out
    store.close()
