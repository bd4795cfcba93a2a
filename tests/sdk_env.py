"""Where the OpenHands SDK's Python environment is (the SDK needs Python >= 3.12).

``$OHM_SDK_VENV`` (a virtual environment's folder), else ``.venv-sdk/`` at the repository's
root, which ``.ci/run`` creates. Used by the conformance suite and by the SDK integration
tests (tests/sdk, run there by tests/test_openhands_sdk.py).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def sdk_venv() -> Path:
    return Path(os.environ.get("OHM_SDK_VENV") or REPO / ".venv-sdk")


def sdk_python() -> Path | None:
    venv = sdk_venv()
    python = venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    return python if python.exists() else None


def sdk_here() -> bool:
    """Whether this interpreter can import the SDK itself."""
    return sys.version_info >= (3, 12) and importlib.util.find_spec("openhands.sdk") is not None


def sdk_missing(what: str) -> str:
    """The message for a missing SDK environment."""
    return (
        f"no OpenHands SDK environment at {sdk_venv()} for {what}: create it with "
        "`python3.12 -m venv .venv-sdk && .venv-sdk/bin/pip install -r tests/conformance/requirements.txt "
        "'.[openhands,postgres]' pytest hypothesis` (or point OHM_SDK_VENV at one)"
    )
