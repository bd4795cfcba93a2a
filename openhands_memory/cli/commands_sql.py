"""``sql``: read-only queries, read-only by construction (``storage.read_only_query``, one
runner per backend); this command parses the options and formats the rows."""

from __future__ import annotations

import click

from ..errors import MultipleStatements, QueryTimeout
from .opening import is_url, judge
from .output import Column, Table, echo_csv, echo_json, note
from .params import DATABASE, TEXT, count, number
from .vocabulary import output_format

DEFAULT_TIMEOUT = 30.0  # seconds
DEFAULT_MAX_ROWS = 10_000
MAX_TIMEOUT = 2_147_483.0  # seconds: PostgreSQL's statement_timeout holds at most 2^31-1 ms


@click.command()
@click.argument("db", type=DATABASE)
@click.argument("query", type=TEXT)
@click.option("--timeout", type=number(0, open=True, high=MAX_TIMEOUT), default=DEFAULT_TIMEOUT,
              show_default=True, metavar="SECONDS", help="Stop the query after this long.")
@click.option("--max-rows", type=count(1), default=DEFAULT_MAX_ROWS, show_default=True,
              metavar="N", help="Print at most N rows (a note says when there were more).")
@output_format("csv")
def sql(db: str, query: str, timeout: float, max_rows: int, fmt: str) -> None:
    """Run the SELECT statement QUERY on DB, which it can never change.

    Reads only: writes, ATTACH and pragmas that set something are refused, naming what was
    refused; table-valued pragmas (pragma_table_info('event')) and dbstat are reads. A query
    stops at its time limit or at Ctrl-C.

    \b
    Tables: conversation, event, condensation, forgotten_range, llm_call.
    Example:
      openhands-memory sql agent.db "SELECT kind, COUNT(*) FROM event GROUP BY 1"
      openhands-memory sql agent.db "SELECT name FROM pragma_table_info('event')"
    """
    from ..storage import read_only_query

    # A file is judged first, so that one that is not ours is refused as every command does.
    target = db if is_url(db) else judge(db)
    try:
        result = read_only_query(target, query, timeout=timeout, max_rows=max_rows)
    except MultipleStatements as e:
        raise click.UsageError(str(e)) from None
    except QueryTimeout as e:
        raise click.ClickException(f"{e} (--timeout SECONDS)") from None
    except KeyboardInterrupt:  # Ctrl-C: as the shell expects, status 130
        click.echo("interrupted", err=True)
        raise click.exceptions.Exit(130) from None
    header, rows = result.header, result.rows
    if fmt == "json":
        echo_json([dict(zip(header, row)) for row in rows])
    elif fmt == "csv":
        echo_csv(header, rows)
    else:
        if not header:
            click.echo("(no result)")
            return
        table = Table([Column(h, ">" if rows and isinstance(rows[0][i], (int, float)) else "<", flex=True)
                       for i, h in enumerate(header)])
        for row in rows:
            table.add(["NULL" if v is None else str(v) for v in row])
        table.echo()
        click.echo(f"({len(rows):,} row{'s' if len(rows) != 1 else ''})", err=True)
    if result.truncated:
        note(f"note: only the first {max_rows:,} rows are shown (--max-rows N for more)")
