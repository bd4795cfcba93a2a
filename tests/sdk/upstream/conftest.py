"""The OpenHands SDK's own FileStore / EventLog / conversation persistence tests, run with
``DatabaseFileStore`` wherever they ask for a file store, on SQLite and on PostgreSQL.

The test modules here are the SDK repository's own (see README.md: where each comes from,
the licence, and which tests are left out and why). They are unchanged; this file makes
them run against this project:

* every ``InMemoryFileStore(...)`` and ``LocalFileStore(root, ...)`` they or the SDK make
  (the SDK makes a ``LocalFileStore`` for a conversation's ``persistence_dir``) is a
  ``DatabaseFileStore`` on one database of the session: a fresh conversation for each
  in-memory store, and one conversation per folder for the local ones, so that a
  conversation resumed from the same folder reads back what it wrote;
* every test runs once per backend (``upstream_database``);
* nothing reaches the network: a connection to anywhere but this machine is refused;
* the tests in ``LEFT_OUT`` are deselected, each with its reason;
  ``tests/sdk/test_upstream_adapted.py`` holds that list to tests that exist, and checks
  the cases some of them meant as this store keeps them.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import uuid
from collections.abc import Iterator

import pytest
from openhands.sdk import io as sdk_io
from openhands.sdk.conversation import state as sdk_state
from openhands.sdk.conversation.impl import local_conversation
from openhands.sdk.io import local as sdk_local
from openhands.sdk.io import memory as sdk_memory

from openhands_memory.integrations.openhands_sdk import DatabaseFileStore

#: Tests of the vendored modules that do not run here, and why (module, test name).
LEFT_OUT: dict[tuple[str, str], str] = {
    # They read or write the conversation's folder on disk, which DatabaseFileStore never
    # touches (the ones that only write it would pass without testing anything).
    ("test_conversation_tree", "test_parent_id_round_trips_on_disk_and_root_omits_it"):
        "reads the event files from the persistence folder (rglob)",
    ("test_state_serialization", "test_conversation_state_persistence_save_load"):
        "reads base_state.json and events/*.json from the persistence folder",
    ("test_state_serialization", "test_conversation_state_incremental_save"):
        "counts events/*.json in the persistence folder",
    ("test_state_serialization", "test_conversation_state_event_file_scanning"):
        "writes event files into the persistence folder by hand and expects the SDK to load them",
    ("test_state_serialization", "test_conversation_state_corrupted_event_handling"):
        "writes a corrupt event file into the persistence folder by hand and expects the resume to fail",
    ("test_state_serialization", "test_conversation_state_missing_base_state"):
        "writes an event file into the persistence folder by hand (the folder is never read: it would pass untested)",
    ("test_state_serialization", "test_conversation_state_exclude_from_base_state"):
        "reads base_state.json from the persistence folder",
    ("test_state_serialization", "test_conversation_state_stats_preserved_on_resume"):
        "reads base_state.json from the persistence folder",
    ("test_state_serialization", "test_conversation_state_secrets_serialization_deserialization"):
        "reads base_state.json from the persistence folder",
    ("test_state_serialization", "test_conversation_state_secrets_with_cipher"):
        "reads base_state.json from the persistence folder",
    ("test_state_serialization", "test_v1_11_5_cli_default_conversation_resumes_when_runtime_adds_delegate"):
        "writes a persistence folder from a fixture file of the SDK repository (not vendored); "
        "also fails on the pinned SDK with its own stores",
    # They fail on the pinned SDK (1.58.0) with the SDK's own stores as well: these are
    # 1.43.1's tests (the mirror has no later tag), written for APIs that changed since.
    ("test_conversation_tree", "test_generate_title_reads_active_branch"):
        "1.58 passes call_context to the title generator the test stands in for",
    ("test_fork", "test_fork_with_title_sets_tag"):
        "fork(title=...) is deprecated in 1.58 and no longer sets the tag",
    ("test_fork", "test_fork_default_does_not_clobber_source_cache_key"):
        "1.58's LLM has no _call_context attribute the test reads",
    ("test_fork", "test_fork_with_aliased_agent_does_not_clobber_source_cache_key"):
        "1.58's LLM has no _call_context attribute the test reads",
    # DatabaseFileStore keeps the event log append-only and refuses an event file it could
    # not store as the event it names; tests/sdk/test_upstream_adapted.py checks these
    # cases as the store keeps them.
    ("test_event_store", "test_event_log_missing_event_file"):
        "deletes an event file: events are append-only (PermissionError)",
    ("test_event_store", "test_event_log_iteration_with_missing_files"):
        "deletes an event file: events are append-only (PermissionError)",
    ("test_event_store", "test_event_log_corrupted_json_in_file"):
        "writes text that is not JSON as an event file: refused (MalformedEvent)",
    ("test_event_store", "test_event_log_index_gaps_detection"):
        "writes events 0 and 2 by hand: a gap is refused (ValueError)",
    ("test_event_store", "test_event_log_large_index_formatting"):
        "appends event 99,999 to an empty log: a gap is refused (ValueError)",
    ("test_event_store", "test_event_log_cold_reload_past_100k_events"):
        "writes 100,002 event files whose JSON names another event id: refused (ValueError)",
}


def _local_address(address: object) -> bool:
    host = address[0] if isinstance(address, tuple) else None
    if host is None:
        return True  # a Unix socket
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def no_network(monkeypatch) -> None:
    """Refuse every connection that would leave this machine (the LLM clients the tests
    build must never call out)."""
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _local_address(address):
            raise ConnectionRefusedError(f"the upstream tests may not reach the network ({address!r})")
        return real_connect(self, address)

    def connect_ex(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _local_address(address):
            raise ConnectionRefusedError(f"the upstream tests may not reach the network ({address!r})")
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


@pytest.fixture(scope="session", params=["sqlite", "postgresql"])
def upstream_database(request, tmp_path_factory) -> str:
    """One database per backend for the whole run; each store is a conversation of it."""
    if request.param == "sqlite":
        return str(tmp_path_factory.mktemp("upstream") / "upstream.db")
    return request.getfixturevalue("postgres_database_factory")()


@pytest.fixture(autouse=True)
def database_file_stores(request, upstream_database, monkeypatch) -> Iterator[list[DatabaseFileStore]]:
    """``InMemoryFileStore`` and ``LocalFileStore`` are ``DatabaseFileStore``s for the test,
    in the SDK's modules and in the test's own (which imported the names)."""
    opened: list[DatabaseFileStore] = []
    folders: dict[str, str] = {}  # a LocalFileStore's folder -> its conversation

    class InMemoryFileStore(DatabaseFileStore):
        """A fresh conversation, as a fresh in-memory store is empty."""

        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(upstream_database, uuid.uuid4())
            opened.append(self)

    class LocalFileStore(DatabaseFileStore):
        """The conversation of the folder ``root``: the same one each time it is opened."""

        def __init__(self, root: str, *args: object, **kwargs: object) -> None:
            folder = os.path.realpath(os.path.expanduser(str(root)))
            super().__init__(upstream_database, folders.setdefault(folder, str(uuid.uuid4())))
            opened.append(self)

    for module in (sdk_io, sdk_state, local_conversation, sdk_local, sdk_memory, request.module):
        if hasattr(module, "InMemoryFileStore"):
            monkeypatch.setattr(module, "InMemoryFileStore", InMemoryFileStore)
        if hasattr(module, "LocalFileStore"):
            monkeypatch.setattr(module, "LocalFileStore", LocalFileStore)
    yield opened
    for store in opened:
        store.close()


def _key(item: pytest.Item) -> tuple[str, str]:
    return (item.module.__name__.rsplit(".", 1)[-1], item.originalname)  # type: ignore[attr-defined]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    left = [i for i in items if str(i.path).startswith(here + os.sep) and _key(i) in LEFT_OUT]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = [i for i in items if i not in left]
