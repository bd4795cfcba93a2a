import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

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
from . import sdk_suite  # noqa: E402
from .sdk_env import sdk_here  # noqa: E402

# tests/sdk needs the OpenHands SDK (Python >= 3.12): without it here, test_openhands_sdk.py
# runs that folder in the SDK's environment instead.
collect_ignore = [] if sdk_here() else ["sdk"]
from openhands_memory.conversation import EventStore  # noqa: E402

SDK_ITEMS = "tests/test_openhands_sdk.py::test_sdk["


def pytest_collect_file(file_path, parent):
    """tests/sdk's collection in the SDK's environment starts as soon as its module is found,
    and goes on while the other modules are collected (tests/sdk_suite.py)."""
    if file_path.name == "test_openhands_sdk.py" and file_path.parent == Path(__file__).parent:
        sdk_suite.start_collecting(sdk_suite.run_folder(parent.config))


def pytest_sessionfinish(session):
    sdk_suite.forget(sdk_suite.run_folder(session.config))


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` (the suite's), except for test_openhands_sdk.py's tests: each chunk
    of SDK files (tests/sdk_suite.py) is one unit of work, run by one process there, so the
    chunks run on both workers; and they are handed out first, so the run never ends waiting
    for one."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SdkChunksFirst(LoadFileScheduling):
        chunk_of: dict[str, int] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if sdk_file_of(nodeid) is None:
                return super()._split_scope(nodeid)
            if self.chunk_of is None:
                files = [sdk_file_of(n) for n in self.collection or ()]
                self.chunk_of = sdk_suite.chunks([f for f in files if f is not None], sdk_suite.CHUNKS)
            return f"{SDK_ITEMS}chunk {self.chunk_of[sdk_file_of(nodeid)]}]"

        def _assign_work_unit(self, node) -> None:
            sdk = next((scope for scope in self.workqueue if scope.startswith(SDK_ITEMS)), None)
            if sdk is not None:
                self.workqueue.move_to_end(sdk, last=False)
            super()._assign_work_unit(node)

    return SdkChunksFirst(config, log)


def sdk_file_of(nodeid: str) -> str | None:
    """The SDK test file of one of test_openhands_sdk.py's tests (its id begins with the file's
    path under tests/sdk), or None for any other test."""
    if not nodeid.startswith(SDK_ITEMS) or ".py" not in nodeid[len(SDK_ITEMS):]:
        return None
    return sdk_suite.SDK_TESTS + nodeid[len(SDK_ITEMS):].split(".py", 1)[0] + ".py"


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


from .backends import (  # noqa: E402,F401
    database_url, pgbouncer, postgres_database_factory, postgres_server, pytest_generate_tests,
)
