"""Pytest fixtures for LLM tests; the lead imports them into conftest.py.

    from tests.llm_fixtures import llm_server  # noqa: F401  (or: from llm_fixtures import ...)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

try:  # works both as `tests.llm_fixtures` and with tests/ on sys.path (rootdir-relative)
    from .llm_server import FakeLLMServer
except ImportError:  # pragma: no cover - depends on how pytest imported us
    from llm_server import FakeLLMServer  # type: ignore[no-redef]


@pytest.fixture
def llm_server() -> Iterator[FakeLLMServer]:
    """A started FakeLLMServer on 127.0.0.1; stopped (and its threads released) afterwards."""
    server = FakeLLMServer().start()
    try:
        yield server
    finally:
        server.stop()
