"""The ``openhands-memory`` command-line tool (also ``python cli.py`` and
``python -m openhands_memory.cli``).

Commands live in ``commands_*.py`` and are imported only when run, so ``--help`` and short
commands start without loading what they do not use. Errors the user can act on end the
command with a one-line message and exit status 1, a value an argument cannot take included
(``params.py``); a command line of the wrong shape (an unknown option, a missing argument,
options that exclude each other) is a usage error, exit status 2.
"""

from __future__ import annotations

import logging
import sqlite3
import sys
from typing import Any

import click

from .. import __version__
from .errors import UserError

# name -> (module, function, section, one-line help); the order is the order in --help.
COMMANDS: dict[str, tuple[str, str, str, str]] = {
    "init": ("commands_db", "init", "Database", "Create a database file."),
    "migrate": ("commands_db", "migrate", "Database", "Upgrade or downgrade a file's schema, after a backup."),
    "conversations": ("commands_db", "conversations", "Database", "List conversations with their sizes and condensations."),
    "stats": ("commands_db", "stats", "Database", "Events, condensations and summarizer calls and cost."),
    "doctor": ("commands_doctor", "doctor", "Database", "Check a database; --fix repairs what it can."),
    "sql": ("commands_sql", "sql", "Database", "Run a read-only SQL query."),
    "append": ("commands_events", "append", "Events", "Append JSON or JSONL events from a file or stdin."),
    "view": ("commands_events", "view", "Events", "What the agent sees now, or saw after event N."),
    "history": ("commands_events", "history", "Events", "Every event, forgotten ones marked."),
    "import": ("commands_io", "import_", "Events", "Import an OpenHands folder, a V0 trajectory or JSONL."),
    "export": ("commands_io", "export", "Events", "Export a conversation as JSONL or an OpenHands folder."),
    "sync": ("commands_sync", "sync", "Events", "Pull what an OpenHands agent server holds and DB lacks."),
    "branches": ("commands_tree", "branches", "Branches", "The history tree: each branch's leaf, length and fork."),
    "navigate": ("commands_tree", "navigate", "Branches", "Move HEAD to an event (the next one starts a branch)."),
    "fork": ("commands_tree", "fork", "Branches", "Copy a branch's path into a new conversation."),
    "condense": ("commands_condense", "condense", "Condensing", "Run a condenser now (--dry-run to preview)."),
    "request-condensation": ("commands_condense", "request_condensation", "Condensing", "Ask for a condensation at the next step."),
    "pin": ("commands_pins", "pin", "Condensing", "Pin an event, so that condensing never loses it."),
    "unpin": ("commands_pins", "unpin", "Condensing", "Unpin an event: condensations may forget it again."),
    "pins": ("commands_pins", "pins", "Condensing", "The pins in force, and how the view shows each."),
    "search": ("commands_recall", "search", "Recall", "Find events a condensation hid (--scope all: any event)."),
    "show": ("commands_recall", "show", "Recall", "Read one event in full, with the ids around it."),
    "replay": ("commands_replay", "replay", "Condensing", "What other strategies would have sent and cost."),
    "search-index": ("commands_recall", "search_index", "Recall", "Switch the search index on or off."),
    "serve": ("commands_serve", "serve", "Inspect", "A local web inspector: what the model saw at each call."),
    "demo": ("commands_demo", "demo", "Try it", "Build a demo database from a bundled agent session."),
}
SECTIONS = ("Database", "Events", "Branches", "Condensing", "Recall", "Inspect", "Try it")

EPILOG = """\
Examples:

\b
  openhands-memory demo
  openhands-memory serve openhands-memory-demo.db --open
  openhands-memory view openhands-memory-demo.db demo
  openhands-memory import agent.db ~/.openhands/conversations/<id>
  openhands-memory condense agent.db <id> --dry-run
  openhands-memory pin agent.db <id> 12 --mode reinject --label plan
  openhands-memory search agent.db <id> "KeyError"
  openhands-memory replay openhands-memory-demo.db demo --model gpt-4o
  openhands-memory sql agent.db "SELECT kind, COUNT(*) FROM event GROUP BY 1"

Conversation ids may be shortened to any unique prefix.
"""


def _user_errors() -> tuple[type[BaseException], ...]:
    from ..errors import OpenHandsMemoryError

    errors: tuple[type[BaseException], ...] = (OpenHandsMemoryError, OSError, sqlite3.Error)
    if "sqlalchemy" in sys.modules:  # loaded only to create or migrate a file
        from sqlalchemy.exc import SQLAlchemyError

        errors += (SQLAlchemyError,)
    return errors


def _message(exc: BaseException) -> str:
    """One line saying what went wrong."""
    orig = getattr(exc, "orig", None)  # SQLAlchemy wraps the driver's error
    if isinstance(orig, sqlite3.Error):
        exc = orig
    if isinstance(exc, sqlite3.Error):
        text = f"SQLite: {exc}"
    elif isinstance(exc, OSError) and exc.strerror and getattr(exc, "filename", None):
        text = f"{exc.filename}: {exc.strerror}"
    elif "sqlalchemy" in sys.modules and _is_sqlalchemy_error(exc):
        text = f"database: {exc._message()}"  # type: ignore[attr-defined]  # no help-site link
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def _committed_anyway(exc: BaseException) -> bool:
    from ..errors import StorageFault

    return isinstance(exc, StorageFault) and exc.committed


def _is_sqlalchemy_error(exc: BaseException) -> bool:
    from sqlalchemy.exc import SQLAlchemyError

    return isinstance(exc, SQLAlchemyError)


class LazyGroup(click.Group):
    """A group whose commands are imported on first use, listed in sections."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        spec = COMMANDS.get(name)
        if spec is None:
            return None
        import importlib

        module = importlib.import_module(f"{__name__}.{spec[0]}")
        return getattr(module, spec[1])

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        width = max(len(name) for name in COMMANDS)  # one alignment for every section
        for section in SECTIONS:
            rows = [(name.ljust(width), spec[3]) for name, spec in COMMANDS.items() if spec[2] == section]
            with formatter.section(section):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.BadParameter as exc:
            if isinstance(exc, click.MissingParameter):  # the command line's shape: usage, exit 2
                raise
            # A value the argument cannot take (cli/params.py, a choice, a range): one line,
            # exit 1, as any bad input; nothing was opened yet.
            raise UserError(" ".join(exc.format_message().split())) from None
        except (click.UsageError, UserError, click.exceptions.Exit, click.Abort, BrokenPipeError):
            raise
        except click.ClickException as exc:
            raise UserError(" ".join(exc.message.split())) from None
        except _user_errors() as exc:
            if _committed_anyway(exc):
                # The command's write committed (the WAL holds it, as after any commit); only
                # the copy into the main file failed. Exit 1 would make a script retry a write
                # that landed, so it is said as a warning and the command succeeds.
                click.echo(f"Warning: {_message(exc)}", err=True)
                return None
            raise UserError(_message(exc)) from None


@click.group("openhands-memory", cls=LazyGroup, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="openhands-memory", message="%(prog)s %(version)s")
@click.option("-v", "--verbose", is_flag=True, help="Show the library's log messages on stderr.")
@click.pass_context
def cli(ctx: click.Context, verbose: bool) -> None:
    """A durable, condensable event history for LLM agents, in an SQLite file or PostgreSQL.

    DB is the database file; CONV a conversation id (or a unique prefix of one).
    """
    log = logging.getLogger("openhands_memory")
    # psycopg's own warnings too ("error ignored terminating <Pipeline>" after a lost
    # connection): the command's one Error line says what happened.
    driver = logging.getLogger("psycopg")
    saved = (log.level, log.propagate, driver.propagate)
    handler: logging.Handler
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        log.setLevel(logging.INFO)
    else:  # commands report what matters themselves (dropped events, fallbacks)
        handler = logging.NullHandler()
    for logger in (log, driver):
        logger.addHandler(handler)
        logger.propagate = False

    def restore() -> None:  # the app may run inside another program (tests, notebooks)
        for logger in (log, driver):
            logger.removeHandler(handler)
        log.setLevel(saved[0])
        log.propagate, driver.propagate = saved[1], saved[2]

    ctx.call_on_close(restore)


def main(argv: list[str] | None = None) -> None:
    """The console script's entry point."""
    from ..allocation import allow_collector_pauses

    # This process is the command's own: its long views and imports may pause the cyclic
    # collector (a library call does not unless its process's owner says so).
    allow_collector_pauses()
    try:
        cli.main(args=argv, prog_name="openhands-memory")
    except BrokenPipeError:  # `openhands-memory history … | head`: the reader has gone
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)


__all__ = ["cli", "main", "COMMANDS"]
