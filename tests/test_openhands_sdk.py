"""The OpenHands SDK integration's tests (tests/sdk), run in the SDK's own environment.

The SDK needs Python >= 3.12 and the suite's main run may be on 3.11, so this test runs
``pytest tests/sdk`` with the SDK environment's Python (see tests/sdk_env.py) and fails with
its output if anything there failed, or if anything was skipped while ``OHM_REQUIRE_SDK=1``
(CI). It lends that run this session's PostgreSQL server. When this interpreter has the SDK
itself, tests/sdk is collected directly and this test has nothing to do.
"""

from __future__ import annotations

import os
import subprocess
import xml.etree.ElementTree as ET

import pytest

from .sdk_env import REPO, sdk_here, sdk_missing, sdk_python


def test_the_sdk_integration_suite_passes_in_the_sdk_environment(request, tmp_path):
    if sdk_here():
        pytest.skip("this interpreter has the SDK: tests/sdk ran in this session")
    required = os.environ.get("OHM_REQUIRE_SDK") == "1"
    python = sdk_python()
    if python is None:
        message = sdk_missing("tests/sdk")
        if required:
            pytest.fail(message + "; OHM_REQUIRE_SDK=1 says it must run")
        pytest.skip(message)
    env = {**os.environ, "PYTHONPATH": str(REPO), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_PROXY": "*"}
    env.pop("PYTEST_ADDOPTS", None)  # the outer run's options (CI's JUnit report) are not for this one
    try:
        env["OHM_TEST_POSTGRES_URL"] = request.getfixturevalue("postgres_server")
    except pytest.skip.Exception:
        pass  # no server here: the PostgreSQL half skips (or fails, with OHM_REQUIRE_POSTGRES=1)
    junit = tmp_path / "sdk.xml"
    done = subprocess.run(
        [str(python), "-m", "pytest", "tests/sdk", "-q", "-o", "addopts=", "-p", "no:cacheprovider", f"--junitxml={junit}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1500,
    )
    output = (done.stdout + done.stderr)[-6000:]
    assert done.returncode == 0, f"tests/sdk failed in {python}:\n{output}"
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    assert suite is not None and int(suite.get("tests", 0)) > 0, output
    if required:
        assert int(suite.get("skipped", 0)) == 0, f"tests/sdk skipped tests:\n{output}"
