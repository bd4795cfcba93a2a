"""The offline summarizer: a deterministic digest of forgotten events, with no model.

It is the summarizer used when no model is configured, and the fallback when a model call
fails. So it must never raise on odd input. It must give the same text for the same input,
and it must keep what an agent needs to carry on: what the user asked, which files were
touched, what ran and how it ended, what went wrong, and where things stand now.

The text it writes opens with :data:`HEADER`. When that text comes back as the previous
summary of a later condensation, it is parsed and merged with the new events rather than
nested inside itself. Any other previous summary (for example one written by an LLM) is kept
verbatim in its own section.

* ``extraction.py``  the facts events state, in one pass (``tools.py``: what a tool call is;
                     ``shell.py``: the files a shell command names; ``text.py``: short text)
* ``digest.py``      what a summary holds, made from facts and merged with an older one
* ``layout.py``      the digest as text, and that text read back (the layout rules)
* ``budget.py``      the caps on list items and on characters
* ``summarizer.py``  ``OfflineSummarizer``: all of the above, in order
"""

from __future__ import annotations

from .extraction import CommandRun, Facts, facts
from .layout import HEADER
from .shell import shell_files
from .summarizer import OfflineSummarizer
from .text import clip, first_meaningful_line

__all__ = [
    "HEADER",
    "CommandRun",
    "Facts",
    "OfflineSummarizer",
    "clip",
    "facts",
    "first_meaningful_line",
    "shell_files",
]
