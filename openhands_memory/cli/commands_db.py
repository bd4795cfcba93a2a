"""Database commands: init, migrate, conversations, stats."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from . import output_format
from .opening import open_readonly, open_store, resolve, writing_store
from .output import Column, Table, echo_csv, echo_json, echo_pairs, heading, number

# --- init ------------------------------------------------------------------------------------


@click.command()
@click.argument("db")
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
            echo_json({"path": db, "created": False, "revision": state.revision})
        else:
            click.echo(f"{db} is already an openhands-memory database (schema revision {state.revision})")
        return
    with writing_store(db, create=True):
        pass
    if as_json:
        echo_json({"path": db, "created": True, "revision": migrate.HEAD})
    else:
        click.echo(f"created {db} (schema revision {migrate.HEAD})")


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


def copy_database(path: Path, target: Path) -> Path:
    """A consistent copy of ``path`` (its -wal content included) through SQLite's backup API."""
    from ..database import connect_readonly

    source = connect_readonly(path)
    try:
        copy = sqlite3.connect(str(target))
        try:
            source.backup(copy)
        finally:
            copy.close()
    finally:
        source.close()
    return target


def backup_file(path: Path, revision: str) -> Path:
    """``DB.bak-<revision>-<UTC time>`` beside ``path``, never overwriting an earlier backup."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.name}.bak-{revision}-{stamp}")
    n = 1
    while target.exists():
        target = path.with_name(f"{path.name}.bak-{revision}-{stamp}-{n}")
        n += 1
    return copy_database(path, target)


def run_migration(path: Path, target: str, *, downgrade: bool) -> None:
    """Upgrade or downgrade in one transaction that holds the write lock from its start.

    Foreign keys are off while it runs (SQLite's batch mode copies tables, and a cascade would
    empty their children), and checked before it commits.
    """
    from sqlalchemy import create_engine, event

    from .. import migrate

    engine = create_engine(f"sqlite:///{path}")

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # our BEGIN, not pysqlite's
        dbapi_conn.execute("PRAGMA busy_timeout=30000")
        dbapi_conn.execute("PRAGMA foreign_keys=OFF")

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    try:
        with engine.connect() as conn, conn.begin():
            if downgrade:
                migrate.downgrade(conn, target)
            else:
                migrate.upgrade(conn, target)
            broken = conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise click.ClickException(
                    f"the migration would leave {len(broken)} row(s) pointing at missing rows "
                    f"(first: table {broken[0][0]}); nothing was changed"
                )
    finally:
        engine.dispose()


@click.command()
@click.argument("db")
@click.option("-r", "--revision", help="Target revision (default: the newest). With --downgrade: required; 'base' removes every table.")
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
    from ..database import inspect_sqlite_file
    from ..errors import SchemaTooNew

    path = Path(db).expanduser()
    state = inspect_sqlite_file(path)
    if not state.exists:
        raise click.ClickException(f"{db}: no such database file")
    current = state.revision
    if current is None:
        raise click.ClickException(f"{db} is empty: nothing to migrate (create it with `openhands-memory init {db}`)")
    if current not in m.REVISIONS:
        raise SchemaTooNew(db, current)
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
            raise click.UsageError(f"{db} is at {current}, newer than {target}: use --downgrade to go back")
        steps = m.pending(current, target)
        revision = target
        verb = "upgrade"
    outcome: dict[str, Any] = {"path": db, "from": current, "to": revision if steps else current,
                               "direction": verb, "steps": steps, "dry_run": dry_run, "backup": None}
    if not steps:
        if as_json:
            echo_json(outcome)
        else:
            click.echo(f"{db} is already at revision {current}: nothing to do")
        return
    docs = _descriptions()
    title = f"{verb} {db} from {current} to {revision}"
    if dry_run:
        if as_json:
            echo_json(outcome)
            return
        click.echo(f"would {title}:")
        for step in steps:
            click.echo(f"  {step}  {docs.get(step, '')}".rstrip())
        click.echo("dry run: nothing was written")
        return
    backup = backup_file(path, current)
    try:
        run_migration(path, revision, downgrade=downgrade)  # type: ignore[arg-type]
    except click.ClickException:
        backup.unlink(missing_ok=True)  # nothing changed: the copy is not needed
        raise
    except Exception as e:  # SQLAlchemy's or SQLite's error, raised by a revision's DDL
        backup.unlink(missing_ok=True)
        orig = getattr(e, "orig", None) or e
        detail = " ".join(str(orig).split())
        raise click.ClickException(
            f"{db}: {verb} {current} -> {revision} failed ({detail}); the file's "
            f"revision mark ({current}) may disagree with its tables; nothing was changed"
        ) from None
    after = inspect_sqlite_file(path).revision
    outcome.update(to=after, backup=str(backup))
    if as_json:
        echo_json(outcome)
        return
    click.echo(f"backed up {db} to {backup}")
    click.echo(f"{verb}d {db}: {current} -> {after} ({len(steps)} revision{'s' if len(steps) > 1 else ''})")


# --- conversations and stats -----------------------------------------------------------------


def hidden_runs(conn: sqlite3.Connection, cid: str) -> list[tuple[int, int]]:
    row = conn.execute(
        "SELECT hidden FROM condensation WHERE conversation_id = ? ORDER BY id DESC LIMIT 1", (cid,)
    ).fetchone()
    return [(s, e) for s, e in json.loads(row[0])] if row else []


def visible_totals(conn: sqlite3.Connection, cid: str) -> tuple[int, int | None, int]:
    """(visible events, their cached tokens or None, how many of them are counted).

    Visible: LLM-visible events no condensation has forgotten (the view before its
    well-formedness checks, and without the summary).
    """
    sql = (
        "SELECT COUNT(*), SUM(token_count), COUNT(token_count) FROM event "
        "WHERE conversation_id = ? AND llm_visible AND id BETWEEN ? AND ?"
    )
    visible, tokens, counted = conn.execute(sql, (cid, 0, 2**62)).fetchone()
    tokens = tokens or 0
    for s, e in hidden_runs(conn, cid):
        v, t, c = conn.execute(sql, (cid, s, e)).fetchone()
        visible, tokens, counted = visible - v, tokens - (t or 0), counted - c
    return visible, (tokens if counted else None), counted


def _when(timestamp: str | None) -> str:
    if not timestamp:
        return ""
    return timestamp.replace("T", " ")[:16]


def conversation_rows(conn: sqlite3.Connection, ids: list[str] | None = None) -> list[dict[str, Any]]:
    rows = []
    for cid, created in conn.execute("SELECT id, created_at FROM conversation ORDER BY created_at, id"):
        if ids is not None and cid not in ids:
            continue
        events, last = conn.execute(
            "SELECT COUNT(*), MAX(timestamp) FROM event WHERE conversation_id = ?", (cid,)
        ).fetchone()
        condensations = conn.execute(
            "SELECT COUNT(*) FROM condensation WHERE conversation_id = ?", (cid,)
        ).fetchone()[0]
        visible, tokens, counted = visible_totals(conn, cid)
        rows.append({
            "id": cid, "created_at": created, "events": events, "visible": visible, "tokens": tokens,
            "tokens_counted_events": counted, "condensations": condensations, "last_activity": last,
        })
    return rows


@click.command()
@click.argument("db")
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
    conn = open_readonly(db)
    rows = conversation_rows(conn)
    keys = ["id", "events", "visible", "tokens", "condensations", "last_activity"]
    if fmt == "json":
        echo_json(rows)
    elif fmt == "csv":
        echo_csv(keys, ([r[k] for k in keys] for r in rows))
    else:
        if not rows:
            click.echo(f"{db} holds no conversations yet (add one with `import` or `append --create`)")
            return
        table = Table([
            Column("id", flex=True, min=8), Column("events", ">"), Column("visible", ">"),
            Column("tokens", ">"), Column("cond.", ">"), Column("last activity"),
        ])
        for r in rows:
            table.add([r["id"], r["events"], r["visible"], r["tokens"], r["condensations"], _when(r["last_activity"])])
        table.echo()


def _in(ids: list[str]) -> tuple[str, tuple[str, ...]]:
    return f"conversation_id IN ({', '.join('?' for _ in ids)})", tuple(ids)


def collect_stats(conn: sqlite3.Connection, ids: list[str]) -> dict[str, Any]:
    convs = conversation_rows(conn, ids)
    where, args = _in(ids)
    strategies = [
        {"strategy": s or "", "reason": r or "", "count": n, "forgotten": f or 0,
         "tokens_before": tb, "tokens_after": ta}
        for s, r, n, f, tb, ta in conn.execute(
            f"SELECT c.strategy, c.reason, COUNT(*), "
            f"(SELECT SUM(end_id - start_id + 1) FROM forgotten_range f "
            f" JOIN condensation d ON d.conversation_id = f.conversation_id AND d.id = f.condensation_id "
            f" WHERE d.{where} AND d.strategy IS c.strategy AND d.reason IS c.reason), "
            f"SUM(c.tokens_before), SUM(c.tokens_after) "
            f"FROM condensation c WHERE c.{where} GROUP BY c.strategy, c.reason ORDER BY COUNT(*) DESC",
            args + args,
        )
    ]
    calls: list[dict[str, Any]] = []
    for model, purpose, n, p, c, cost, latency in conn.execute(
        f"SELECT model, purpose, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(cost_usd), "
        f"SUM(latency_s) FROM llm_call WHERE {where} GROUP BY model, purpose ORDER BY model, purpose",
        args,
    ):
        outcomes = dict(conn.execute(
            f"SELECT outcome, COUNT(*) FROM llm_call WHERE {where} AND model = ? AND purpose = ? "
            f"GROUP BY outcome ORDER BY COUNT(*) DESC",
            args + (model, purpose),
        ).fetchall())
        calls.append({"model": model, "purpose": purpose, "calls": n, "prompt_tokens": p,
                      "completion_tokens": c, "cost_usd": cost, "latency_s": latency, "outcomes": outcomes})
    tokens = [r["tokens"] for r in convs if r["tokens"] is not None]
    return {
        "conversations": len(convs),
        "events": sum(r["events"] for r in convs),
        "visible": sum(r["visible"] for r in convs),
        "tokens": sum(tokens) if tokens else None,
        "condensations": sum(r["condensations"] for r in convs),
        "condensations_by_strategy": strategies,
        "llm_calls": {
            "calls": sum(c["calls"] for c in calls),
            "prompt_tokens": sum(c["prompt_tokens"] or 0 for c in calls),
            "completion_tokens": sum(c["completion_tokens"] or 0 for c in calls),
            "cost_usd": sum(c["cost_usd"] or 0 for c in calls) if any(c["cost_usd"] is not None for c in calls) else None,
            "by_model": calls,
        },
    }


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
@click.argument("db")
@click.argument("conversation", metavar="[CONV]", required=False)
@output_format("table", "json")
def stats(db: str, conversation: str | None, fmt: str) -> None:
    """Events, visible events, tokens, condensations by strategy and reason, and what the
    summarizer calls cost (from the llm_call ledger), for one conversation or all of DB.

    \b
    Example:
      openhands-memory stats agent.db
      openhands-memory stats agent.db fix-bug --json
    """
    conn = open_readonly(db)
    if conversation is not None:
        ids = [resolve(conn, conversation)]
        title = f"conversation {ids[0]}"
    else:
        ids = [r[0] for r in conn.execute("SELECT id FROM conversation")]
        title = f"{db}: {len(ids)} conversation{'s' if len(ids) != 1 else ''}"
    result = collect_stats(conn, ids)
    if fmt == "json":
        echo_json({"scope": ids[0] if conversation else "all", **result})
    else:
        echo_stats(title, result)
