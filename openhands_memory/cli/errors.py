"""The error a command reports when the user can act on it (``Error: …``, exit status 1).

Its own module, so that the commands, which the group in ``__init__`` imports lazily by name,
import it without importing that group back.
"""

from __future__ import annotations

import sys
from typing import Any

import click


class UserError(click.ClickException):
    """An error the user can act on: ``Error: …`` on one line, exit status 1.

    On a terminal the message is wrapped to its width (80 columns when unknown), continuation
    lines indented; to a pipe or a file it stays one line, for scripts and logs to grep.
    """

    def show(self, file: Any = None) -> None:
        stream = file if file is not None else sys.stderr
        text = f"Error: {self.format_message()}"
        if getattr(stream, "isatty", lambda: False)():
            import shutil
            import textwrap

            width = shutil.get_terminal_size((80, 24)).columns
            text = textwrap.fill(text, width, subsequent_indent="  ", break_on_hyphens=False,
                                 break_long_words=False)
        click.echo(text, file=stream)
