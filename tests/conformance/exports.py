"""Conformance cases from this project's own condensations, exported as SDK folders.

A generated history is appended event by event to a store, the way an agent would, with
``conv.step(LLMSummarizingCondenser(...))`` after each event (offline summaries: several
condensations, each replacing the previous summary). The conversation is exported with
``openhands-memory``'s SDK export; the SDK then *resumes* the folder (``ConversationState``
from ``base_state.json`` plus the events, with an Agent of the history's tools) and its view
and messages must equal this project's view of the original conversation.

These conversations were never imported from an SDK folder, like a JSONL import: their
``base_state.json`` is the one the export writes.
"""

from __future__ import annotations

import json
from pathlib import Path

from openhands_memory.condensers import LLMSummarizingCondenser, StructuredSummaryCondenser
from openhands_memory.events import event_from_dict
from openhands_memory.io.sdk import BUILTIN_TOOLS, export_folder
from openhands_memory.conversation import Conversation, EventStore

from .trajectories import simulate

SETTINGS = [
    (200, 60, LLMSummarizingCondenser, {"max_size": 30, "keep_first": 2}),
    (201, 60, LLMSummarizingCondenser, {"max_size": 24, "keep_first": 4}),
    (202, 80, StructuredSummaryCondenser, {"max_size": 40, "keep_first": 1}),
    (203, 40, LLMSummarizingCondenser, {"max_size": 16, "keep_first": 1}),
]


def build(store: EventStore, root: Path, save_dir: str) -> tuple[list[dict], dict[str, Conversation]]:
    """(cases for the runner, the original conversations by case id)."""
    cases, conversations = [], {}
    for seed, steps, cls, settings in SETTINGS:
        history = [e for e in simulate(seed, steps, save_dir)
                   if e["kind"] not in ("Condensation", "CondensationRequest")]
        conv = store.create_conversation(f"export-{seed}")
        for e in history:
            conv.append(event_from_dict(e))
            conv.step(cls(**settings))
        folder = root / f"export-{seed}"
        export_folder(conv, folder)
        state = json.loads((folder / "base_state.json").read_text())
        tools = [t["name"] for t in state["agent"]["tools"] if t["name"] not in BUILTIN_TOOLS]
        case_id = f"export/{seed}-{cls.type}"
        cases.append({"id": case_id, "events": [], "resume": {"folder": str(folder), "tools": tools}})
        conversations[case_id] = conv
    return cases, conversations
