"""Database commands: init, migrate, conversations, stats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from .opening import open_reader, shown, writing_store
from .output import Column, Table, echo_csv, echo_json, echo_pairs, heading, number, progress_bar
from .params import DATABASE, TEXT
from .vocabulary import output_format

# --- init ------------------------------------------------------------------------------------


@click.command()
@click.argument("db", type=DATABASE)
@output_format()
def init(db: str, fmt: str) -> None:
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
        if fmt == "json":
            echo_json({"path": shown(db), "created": False, "revision": state.revision})
        else:
            click.echo(f"{shown(db)} is already an openhands-memory database (schema revision {state.revision})")
        return
    with writing_store(db, create=True):
        pass
    if fmt == "json":
        echo_json({"path": shown(db), "created": True, "revision": migrate.HEAD})
    else:
        click.echo(f"created {shown(db)} (schema revision {migrate.HEAD})")


# --- migrate ---------------------------------------------------------------------------------


@click.command()
@click.argument("db", type=DATABASE)
@click.option("-r", "--revision", type=TEXT, metavar="REVISION", help="Target revision (default: the newest). With --downgrade: required; 'base' removes every table.")
@click.option("--downgrade", is_flag=True, help="Go back to an older revision.")
@click.option("--dry-run", is_flag=True, help="Show what would be done; write nothing.")
@output_format()
def migrate(db: str, revision: str | None, downgrade: bool, dry_run: bool, fmt: str) -> None:
    """Bring DB's schema to the newest revision (or to --revision).

    A backup copy DB.bak-<revision>-<time> is made first (SQLite's backup API, so content
    still in the -wal file is copied too), and the migration runs in one transaction.

    \b
    Example:
      openhands-memory migrate agent.db --dry-run
      openhands-memory migrate agent.db
    """
    from .. import migration_plan as m

    if downgrade and revision is None:
        from ..migrate import REVISIONS

        raise click.UsageError(f"--downgrade needs --revision (base or one of {', '.join(REVISIONS)})")
    try:
        plan = m.plan(db, revision, downgrade=downgrade)
    except m.UnknownRevision as e:
        raise click.BadParameter(str(e), param_hint="--revision") from None
    except m.WrongDirection as e:
        raise click.UsageError(f"{e}: use --downgrade to go back") from None
    verb, steps = plan.direction, plan.steps
    outcome: dict[str, Any] = {"path": shown(db), "from": plan.current, "to": plan.target if steps else plan.current,
                               "direction": verb, "steps": list(steps), "dry_run": dry_run, "backup": None}
    if not steps or dry_run:
        if fmt == "json":
            echo_json(outcome)
        elif not steps:
            click.echo(f"{shown(db)} is already at revision {plan.current}: nothing to do")
        else:
            click.echo(f"would {verb} {shown(db)} from {plan.current} to {plan.target}:")
            for step, doc in plan.descriptions().items():
                click.echo(f"  {step}  {doc}".rstrip())
            click.echo("dry run: nothing was written")
        return
    update, finish = progress_bar("indexing events for search")  # revision 0008's backfill
    try:
        done = m.run(plan, progress=update)
    finally:
        if finish is not None:
            finish()
    outcome.update(to=done.revision, backup=str(done.backup) if done.backup is not None else None)
    if fmt == "json":
        echo_json(outcome)
        return
    if done.backup is not None:
        click.echo(f"backed up {shown(db)} to {done.backup}")
    else:
        click.echo(f"{shown(db)}: no backup is made of a server database (pg_dump first if you need one)")
    click.echo(f"{verb}d {shown(db)}: {plan.current} -> {done.revision} ({len(steps)} revision{'s' if len(steps) > 1 else ''})")


# --- conversations and stats -----------------------------------------------------------------


def _when(timestamp: str | None) -> str:
    if not timestamp:
        return ""
    return timestamp.replace("T", " ")[:16]


@click.command()
@click.argument("db", type=DATABASE)
@output_format("csv")
def conversations(db: str, fmt: str) -> None:
    """List DB's conversations.

    Visible: LLM-visible events that no condensation has forgotten. Tokens: their cached token
    counts (blank until a token-counting condenser has counted them). Last activity: the
    newest event's timestamp. Status (conversations an OpenHands agent server streamed in with
    serve --ingest): what it last said, its model, cost and title; "incomplete" while events
    wait for a parent it has not delivered.

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
        served = any(r["agent_server"] for r in rows)  # from an OpenHands agent server: its status too
        table = Table([
            Column("id", flex=True, min=8), Column("events", ">"), Column("visible", ">"),
            Column("tokens", ">"), Column("cond.", ">"), Column("last activity"),
            *([Column("status", flex=True, min=6)] if served else []),
        ])
        for r in rows:
            table.add([r["id"], r["events"], r["visible"], r["tokens"], r["condensations"], _when(r["last_activity"]),
                       *([_status(r)] if served else [])])
        table.echo()
        for r in rows:
            if r["waiting"]:
                click.echo(f"{r['id']}: incomplete, {r['waiting']} event(s) wait for a parent the agent server has "
                           "not delivered (`sync --agent-server URL` fills the gap)")


def _status(row: dict[str, Any]) -> str:
    """An agent server's conversation in a few words: its status, model, cost and title."""
    info = row["agent_server"] or {}
    parts = [info.get("status") or ""]
    if row["waiting"]:
        parts[0] = "incomplete"
    if info.get("model"):
        parts.append(str(info["model"]))
    if info.get("cost_usd"):
        parts.append(f"${info['cost_usd']:,.4f}")
    if info.get("title"):
        parts.append(str(info["title"]))
    return " · ".join(p for p in parts if p)


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
@output_format()
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
