"""Database commands: init, migrate, conversations, stats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from . import output_format
from .opening import is_url, open_reader, shown, writing_store
from .output import Column, Table, echo_csv, echo_json, echo_pairs, heading, number, progress_bar
from .params import DATABASE, TEXT

# --- init ------------------------------------------------------------------------------------


@click.command()
@click.argument("db", type=DATABASE)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def init(db: str, as_json: bool) -> None:
    """Create the database file DB at the current schema revision.

    A file that already is an up-to-date database is left as it is. A new file is built
    beside DB and put in place once complete: an interrupted init leaves no file at all (an
    existing empty file, as `touch` makes, is taken as a new database).

    \b
    Example:
      openhands-memory init agent.db
      openhands-memory init agent.db --json
    """
    from .. import migrate
    from ..database import inspect_sqlite_file

    state = inspect_sqlite_file(Path(db).expanduser())
    if state.revision is not None:
        from ..database import check_revision

        check_revision(db, state.revision)
        if as_json:
            echo_json({"path": shown(db), "created": False, "revision": state.revision})
        else:
            click.echo(f"{shown(db)} is already an openhands-memory database (schema revision {state.revision})")
        return
    with writing_store(db, create=True):
        pass
    if as_json:
        echo_json({"path": shown(db), "created": True, "revision": migrate.HEAD})
    else:
        click.echo(f"created {shown(db)} (schema revision {migrate.HEAD})")


# --- migrate ---------------------------------------------------------------------------------


def _descriptions() -> dict[str, str]:
    """Each revision's one-line description, from its script."""
    from .. import migrate

    try:
        from alembic.script import ScriptDirectory

        script = ScriptDirectory.from_config(migrate.alembic_config())
        return {s.revision: (s.doc or "").strip() for s in script.walk_revisions()}
    except Exception:  # descriptions are a nicety; never let them stop a migration
        return {}


@click.command()
@click.argument("db", type=DATABASE)
@click.option("-r", "--revision", type=TEXT, help="Target revision (default: the newest). With --downgrade: required; 'base' removes every table.")
@click.option("--downgrade", is_flag=True, help="Go back to an older revision.")
@click.option("--dry-run", is_flag=True, help="Show the revisions that would run; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
def migrate(db: str, revision: str | None, downgrade: bool, dry_run: bool, as_json: bool) -> None:
    """Bring DB's schema to the newest revision (or to --revision).

    A backup copy DB.bak-<revision>-<time> is made first (SQLite's backup API, so content
    still in the -wal file is copied too), and the migration runs in one transaction.

    \b
    Example:
      openhands-memory migrate agent.db --dry-run
      openhands-memory migrate agent.db
    """
    from .. import migrate as m
    from ..database import Location, revision_of
    from ..database import backup as database_backup
    from ..errors import SchemaTooNew, StorageFault

    location = Location.parse(db if is_url(db) else Path(db).expanduser())
    exists, current = revision_of(location)
    if not exists:
        raise click.ClickException(f"{shown(db)}: no such database file")
    if current is None:
        raise click.ClickException(f"{shown(db)} is empty: nothing to migrate (create it with `openhands-memory init {shown(db)}`)")
    if current not in m.REVISIONS:
        raise SchemaTooNew(shown(db), current)
    known = ", ".join(m.REVISIONS)
    if downgrade:
        if revision is None:
            raise click.UsageError(f"--downgrade needs --revision (base or one of {known})")
        if revision != "base" and revision not in m.REVISIONS:
            raise click.BadParameter(f"{revision!r} is not a revision (base or one of {known})", param_hint="--revision")
        stop = 0 if revision == "base" else m.REVISIONS.index(revision) + 1
        steps = list(reversed(m.REVISIONS[stop : m.REVISIONS.index(current) + 1]))
        verb = "downgrade"
    else:
        target = m.HEAD if revision in (None, "head") else revision
        if target not in m.REVISIONS:
            raise click.BadParameter(f"{revision!r} is not a revision (one of {known})", param_hint="--revision")
        if m.REVISIONS.index(target) < m.REVISIONS.index(current):
            raise click.UsageError(f"{shown(db)} is at {current}, newer than {target}: use --downgrade to go back")
        steps = m.pending(current, target)
        revision = target
        verb = "upgrade"
    outcome: dict[str, Any] = {"path": shown(db), "from": current, "to": revision if steps else current,
                               "direction": verb, "steps": steps, "dry_run": dry_run, "backup": None}
    if not steps:
        if as_json:
            echo_json(outcome)
        else:
            click.echo(f"{shown(db)} is already at revision {current}: nothing to do")
        return
    docs = _descriptions()
    title = f"{verb} {shown(db)} from {current} to {revision}"
    if dry_run:
        if as_json:
            echo_json(outcome)
            return
        click.echo(f"would {title}:")
        for step in steps:
            click.echo(f"  {step}  {docs.get(step, '')}".rstrip())
        click.echo("dry run: nothing was written")
        return
    backup = database_backup(location.path, current) if location.path is not None else None
    update, finish = progress_bar("indexing events for search")  # revision 0008's backfill
    m.progress = update
    try:
        m.apply(location, revision, backwards=downgrade)  # type: ignore[arg-type]
    except StorageFault as e:  # a full disk or a read-only place: the message says what became of it
        if backup is not None and not e.committed:
            backup.unlink(missing_ok=True)
        raise
    except Exception as e:  # a refusal, or SQLAlchemy's or the driver's error from a revision's DDL
        if backup is not None:
            backup.unlink(missing_ok=True)  # nothing changed: the copy is not needed
        if isinstance(e, m.MigrationRefused):
            raise click.ClickException(f"{e}; nothing was changed") from None
        orig = getattr(e, "orig", None) or e
        detail = " ".join(str(orig).split())
        raise click.ClickException(
            f"{shown(db)}: {verb} {current} -> {revision} failed ({detail}); the database's "
            f"revision mark ({current}) may disagree with its tables; nothing was changed"
        ) from None
    finally:
        m.progress = None
        if finish is not None:
            finish()
    after = revision_of(location)[1]
    outcome.update(to=after, backup=str(backup) if backup is not None else None)
    if as_json:
        echo_json(outcome)
        return
    if backup is not None:
        click.echo(f"backed up {shown(db)} to {backup}")
    else:
        click.echo(f"{shown(db)}: no backup is made of a server database (pg_dump first if you need one)")
    click.echo(f"{verb}d {shown(db)}: {current} -> {after} ({len(steps)} revision{'s' if len(steps) > 1 else ''})")


# --- conversations and stats -----------------------------------------------------------------


def _when(timestamp: str | None) -> str:
    if not timestamp:
        return ""
    return timestamp.replace("T", " ")[:16]


@click.command()
@click.argument("db", type=DATABASE)
@output_format("table", "json", "csv")
def conversations(db: str, fmt: str) -> None:
    """List DB's conversations.

    Visible: LLM-visible events that no condensation has forgotten. Tokens: their cached token
    counts (blank until a token-counting condenser has counted them). Last activity: the
    newest event's timestamp.

    \b
    Example:
      openhands-memory conversations agent.db
      openhands-memory conversations agent.db --json
    """
    from ..inspection import summaries

    rows = [r.as_dict() for r in summaries(open_reader(db))]
    keys = ["id", "events", "visible", "tokens", "condensations", "last_activity"]
    if fmt == "json":
        echo_json(rows)
    elif fmt == "csv":
        echo_csv(keys, ([r[k] for k in keys] for r in rows))
    else:
        if not rows:
            click.echo(f"{shown(db)} holds no conversations yet (add one with `import` or `append --create`)")
            return
        table = Table([
            Column("id", flex=True, min=8), Column("events", ">"), Column("visible", ">"),
            Column("tokens", ">"), Column("cond.", ">"), Column("last activity"),
        ])
        for r in rows:
            table.add([r["id"], r["events"], r["visible"], r["tokens"], r["condensations"], _when(r["last_activity"])])
        table.echo()


def echo_stats(title: str, stats: dict[str, Any]) -> None:
    heading(title)
    echo_pairs([
        ("events", stats["events"]),
        ("visible", stats["visible"]),
        ("tokens", number(stats["tokens"]) if stats["tokens"] is not None else "not counted"),
        ("condensations", stats["condensations"]),
    ], indent=2)
    if stats["condensations_by_strategy"]:
        click.echo()
        table = Table([
            Column("strategy", flex=True, min=6), Column("reason", flex=True, min=6), Column("count", ">"),
            Column("forgot", ">"), Column("tokens before", ">"), Column("after", ">"),
        ])
        for s in stats["condensations_by_strategy"]:
            table.add([s["strategy"] or "(unknown)", s["reason"], s["count"], s["forgotten"],
                       s["tokens_before"], s["tokens_after"]])
        table.echo()
    llm = stats["llm_calls"]
    click.echo()
    if not llm["calls"]:
        click.echo("no summarizer calls recorded (offline summaries, or none needed)")
        return
    cost = llm["cost_usd"]
    click.echo(
        f"summarizer calls: {number(llm['calls'])}, {number(llm['prompt_tokens'])} prompt + "
        f"{number(llm['completion_tokens'])} completion tokens, "
        + (f"${cost:,.4f}" if cost is not None else "cost unknown")
    )
    table = Table([
        Column("model", flex=True, min=8), Column("purpose"), Column("calls", ">"), Column("outcomes", flex=True, min=6),
        Column("prompt", ">"), Column("compl.", ">"), Column("cost $", ">"),
    ])
    for c in llm["by_model"]:
        outcomes = ", ".join(f"{k} {v}" for k, v in c["outcomes"].items())
        table.add([c["model"], c["purpose"], c["calls"], outcomes, c["prompt_tokens"], c["completion_tokens"],
                   f"{c['cost_usd']:.4f}" if c["cost_usd"] is not None else ""])
    table.echo()


@click.command()
@click.argument("db", type=DATABASE)
@click.argument("conversation", metavar="[CONV]", required=False, type=TEXT)
@output_format("table", "json")
def stats(db: str, conversation: str | None, fmt: str) -> None:
    """Events, visible events, tokens, condensations by strategy and reason, and what the
    summarizer calls cost (from the llm_call ledger), for one conversation or all of DB.

    \b
    Example:
      openhands-memory stats agent.db
      openhands-memory stats agent.db fix-bug --json
    """
    from ..inspection import stats as collect

    store = open_reader(db)
    ids = [store.find_conversation(conversation)] if conversation is not None else None
    result = collect(store, ids).as_dict()
    if ids is not None:
        title = f"conversation {ids[0]}"
    else:
        n = result["conversations"]
        title = f"{shown(db)}: {n} conversation{'s' if n != 1 else ''}"
    if fmt == "json":
        echo_json({"scope": ids[0] if ids else "all", **result})
    else:
        echo_stats(title, result)
