import os

import pytest

# litellm must never reach for the network from the test-suite.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from openhands_memory.store import EventStore  # noqa: E402

try:  # the fake OpenAI-compatible server, for tests that drive litellm over HTTP
    from .llm_fixtures import llm_server  # noqa: F401
except ImportError:  # pragma: no cover - while the module is being written
    pass


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "memory.db"


@pytest.fixture
def store(db_path):
    s = EventStore(db_path)
    yield s
    s.close()


@pytest.fixture
def conv(store):
    return store.create_conversation("c1")


from .backends import database_url, postgres_database_factory  # noqa: E402,F401
