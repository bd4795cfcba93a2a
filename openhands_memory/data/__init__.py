"""Data shipped with the package: the demo conversation (``demo_conversation.jsonl``), made by
``make_demo.py`` in this folder."""

from pathlib import Path

DEMO_CONVERSATION = Path(__file__).resolve().parent / "demo_conversation.jsonl"
