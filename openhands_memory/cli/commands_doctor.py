"""doctor: check a database (quick by default, --full for everything), and with --fix repair
what can be repaired, in one transaction. The checks and repairs are the library's
(``openhands_memory.inspection.doctor``, which says what each depth checks); this prints them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .opening import open_reader, open_store, shown
from .output import echo_json, progress_bar
from .params import DATABASE, number
from .vocabulary import output_format

if TYPE_CHECKING:
    from ..inspection.doctor import Report

# The library's default (inspection.doctor.DEFAULT_MIN_AGE), written here so that --help does
# not import the checks and the storage beneath them; tests/test_startup.py holds them equal.
DEFAULT_MIN_AGE = 600.0


def run_check(store, full: bool, min_age: float) -> Report:
    from ..inspection import doctor as checks

    update, finish = progress_bar("checking" + (" everything" if full else ""))
    try:
        return checks.check(store, full=full, progress=update, min_age=min_age)
    finally:
        if finish is not None:
            finish()


@click.command()
@click.argument("db", type=DATABASE)
@click.option("--full", is_flag=True,
              help="Check everything over the whole history (the file, every tool call and condensation).")
@click.option("--fix", is_flag=True, help="Repair what can be repaired, in one transaction.")
@click.option("--min-age", type=number(0), default=DEFAULT_MIN_AGE, show_default=True,
              metavar="SECONDS",
              help="Answer a dangling call of a conversation's newest batch only once it is this old: until then "
                   "its tool may still be running. 0: every dangling call (no agent is running).")
@output_format()
def doctor(db: str, full: bool, fix: bool, min_age: float, fmt: str) -> None:
    """Check DB: id gaps, tool calls and results, condensation bookkeeping.

    Quick by default: what an agent resuming a conversation relies on, at a cost that follows
    the tail. --full: everything, over the whole history, and SQLite's own integrity checks.
    Exit status 0 when healthy, 1 when problems remain.

    --fix runs beside live agents: it checks again, under each conversation's write lock,
    what it repairs, and answers a call with no result ("interrupted") only when the agent
    has moved on past it or the call is --min-age old; it says which calls it left, and why.

    \b
    Example:
      openhands-memory doctor agent.db
      openhands-memory doctor agent.db --full --fix
    """
    report = run_check(open_reader(db), full, min_age)
    if fix and report.plans:
        from ..inspection import doctor as checks

        store = open_store(db)
        done = checks.repair(store, report)
        report = run_check(store, full, min_age)
        report.fixed, report.left = done.fixed, done.left
    if fmt == "json":
        echo_json(report.as_dict())
    else:
        for line in report.fixed:
            click.echo(f"fixed: {line}")
        for line in report.left:
            click.echo(f"left: {line}")
        for p in report.problems:
            where = f"{p.conversation}: " if p.conversation is not None else ""
            mark = "  [--fix repairs it]" if p.fixable else ""
            click.echo(f"problem: {where}{p.check}: {p.detail}{mark}")
        n = report.conversations
        checked = (f"{n} conversation{'s' if n != 1 else ''}, {report.events:,} events checked"
                   + (", in full" if full else ""))
        if report.healthy:
            click.echo(click.style(f"{shown(db)} is healthy", fg="green") + f" ({checked})")
        else:
            fixable = sum(p.fixable for p in report.problems)
            hint = (f"; {fixable} can be repaired: run `openhands-memory doctor {shown(db)} --fix`"
                    if fixable and not fix else "")
            click.echo(f"{len(report.problems)} problem{'s' if len(report.problems) != 1 else ''} ({checked}){hint}")
    if not report.healthy:
        raise SystemExit(1)
