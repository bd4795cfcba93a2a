"""Summarizers: turn the events a condensation forgets into the text that replaces them."""

from __future__ import annotations

from .offline import HEADER, CommandRun, Facts, OfflineSummarizer, facts, shell_files

__all__ = ["HEADER", "CommandRun", "Facts", "OfflineSummarizer", "facts", "shell_files"]
