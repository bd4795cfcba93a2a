import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

# litellm must never reach for the network from the test-suite.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# Test files live on tmpfs when the machine has one: the suite's files are real SQLite files
# all the same, but a commit's fsync costs nothing there, where on a shared disk each new
# database waited 0.25-0.3 s for it. (Numbered pytest-of-<user> folders, so parallel runs
# do not collide.) OPENHANDS_MEMORY_TEST_TMP overrides the choice.
_TMP = os.environ.get("OPENHANDS_MEMORY_TEST_TMP") or (
    "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
)
if _TMP:
    os.environ["TMPDIR"] = _TMP  # for subprocesses too
    tempfile.tempdir = _TMP

from openhands_memory import database  # noqa: E402

from .llm_server import FakeLLMServer  # noqa: E402
from .sdk_env import sdk_here  # noqa: E402

# tests/sdk needs the OpenHands SDK (Python >= 3.12): without it here, test_openhands_sdk.py
# runs that folder in the SDK's environment instead.
collect_ignore = [] if sdk_here() else ["sdk"]
from openhands_memory.conversation import EventStore  # noqa: E402

# Modules that test creating and migrating files themselves: they keep alembic's real path.
REAL_CREATION = {"tests.test_migrations", "tests.test_database"}


@pytest.fixture(scope="session")
def schema_template(tmp_path_factory):
    """A database made once at the head revision by the real code (alembic)."""
    path = tmp_path_factory.mktemp("template") / "head.db"
    database.create_schema(database.Location.parse(path))
    return path


@pytest.fixture(autouse=True)
def copy_template_schema(request, schema_template, monkeypatch):
    """New databases are copies of the session's template instead of each running alembic's
    create (20-40 ms of CPU each, some hundred times). The copy is the very file alembic
    made; test_migrations and test_database create theirs for real."""
    if request.module.__name__ in REAL_CREATION:
        return
    real = database.create_schema

    def create_schema(location):
        path = location.path
        if path is None or (path.exists() and path.stat().st_size > 0):
            return real(location)
        shutil.copyfile(schema_template, path)

    monkeypatch.setattr(database, "create_schema", create_schema)


@pytest.fixture
def llm_server() -> Iterator[FakeLLMServer]:
    """A fake OpenAI-compatible server on 127.0.0.1 (tests/llm_server.py), for tests that
    drive litellm over HTTP; stopped, its threads released, afterwards."""
    server = FakeLLMServer().start()
    try:
        yield server
    finally:
        server.stop()


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


from .backends import database_url, postgres_database_factory, postgres_server  # noqa: E402,F401
