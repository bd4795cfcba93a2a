"""Data shipped with the package: the demo conversation (``demo_conversation.jsonl``), made by
``tools/make_demo.py`` (a developer script, not shipped)."""

from pathlib import Path

DEMO_CONVERSATION = Path(__file__).resolve().parent / "demo_conversation.jsonl"
