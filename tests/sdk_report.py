"""A pytest plugin for the runs of tests/sdk in the SDK's environment (tests/test_openhands_sdk.py
loads it with ``-p tests.sdk_report``): each test phase's outcome, one JSON line appended to
the file ``$OHM_SDK_REPORT`` as it ends, so what finished is known even if the run is killed.
"""

from __future__ import annotations

import json
import os

import pytest


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.passed and report.when != "call":
        return  # a setup or teardown that passed says nothing
    if report.skipped and isinstance(report.longrepr, tuple):
        text = report.longrepr[2]  # (path, line, reason): the reason is what a reader needs
    else:
        text = report.longreprtext
    if report.failed:
        text += "".join(f"\n--- {name} ---\n{content}" for name, content in report.sections)
    line = {"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome, "text": text,
            "duration": report.duration}
    with open(os.environ["OHM_SDK_REPORT"], "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
