"""This folder's harness (conftest.py), not an SDK test: the SDK's file stores are this
project's DatabaseFileStore while the vendored tests run, the SDK persists a conversation
through it into the run's database and not into the folder, and the network is out of
reach."""

from __future__ import annotations

import socket

import pytest
from openhands.sdk import LLM, Agent, LocalConversation
from openhands.sdk.io import InMemoryFileStore, LocalFileStore
from pydantic import SecretStr

from openhands_memory.conversation import EventStore
from openhands_memory.integrations.openhands_sdk import DatabaseFileStore


def test_the_sdk_persists_a_conversation_through_database_file_store(upstream_database, tmp_path):
    agent = Agent(llm=LLM(model="gpt-4o-mini", api_key=SecretStr("test-key"), usage_id="test-llm"), tools=[])
    folder = tmp_path / "persist"
    conversation = LocalConversation(agent=agent, workspace=str(tmp_path), persistence_dir=str(folder),
                                     visualizer=None)
    conversation.send_message("hello")
    fs = conversation.state._fs
    assert isinstance(fs, DatabaseFileStore)
    with EventStore(upstream_database) as store:  # the run's database holds it
        stored = [e.id for e in store.conversation(fs.conversation_id).events()]
    assert stored == [e.id for e in conversation.state.events] and len(stored) >= 1
    assert not list(folder.rglob("*.json"))  # nothing went to the folder
    again = LocalConversation(agent=agent, workspace=str(tmp_path), persistence_dir=str(folder),
                              conversation_id=conversation.id, visualizer=None)
    assert again.state._fs.conversation_id == fs.conversation_id
    assert [e.id for e in again.state.events] == stored


def test_each_in_memory_store_is_a_fresh_conversation_and_each_folder_one(tmp_path):
    a, b = InMemoryFileStore(), InMemoryFileStore()
    assert isinstance(a, DatabaseFileStore) and a.conversation_id != b.conversation_id
    assert LocalFileStore(str(tmp_path)).conversation_id == LocalFileStore(str(tmp_path / ".")).conversation_id


def test_the_network_is_out_of_reach_and_this_machine_is_not():
    with socket.socket() as s, pytest.raises(ConnectionRefusedError, match="may not reach the network"):
        s.connect(("192.0.2.1", 80))  # (TEST-NET-1: refused before any packet is sent)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.socket() as s:
            s.connect(server.getsockname())
