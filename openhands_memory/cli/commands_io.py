"""import and export."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from .opening import conversation as open_conversation
from .opening import open_reader
from .output import echo_json, note
from .params import DATABASE, TEXT, path
from .vocabulary import old_spelling, output_format

FORMAT_NAMES = {
    "openhands": "OpenHands SDK folder",
    "legacy": "legacy OpenHands trajectory",
    "jsonl": "JSON Lines",
    "json": "JSON list of events",
}
PROGRESS_MIN = 5000  # smaller imports finish before a bar is worth drawing


@click.command("import")
@click.argument("db", type=DATABASE)
@click.argument("path", type=path(path_type=Path))
@click.option("--as", "conversation_id", metavar="ID", type=TEXT,
              help="The new conversation's id (default: base_state.json's id, else the folder or file name).")
@old_spelling("-c", into="conversation_id", new="--as", type=TEXT, metavar="ID")
@old_spelling("--conversation", into="conversation_id", new="--as", type=TEXT, metavar="ID")
@click.option("--no-search-index", "no_index", is_flag=True,
              help="Create DB without the search index (a new DB, or one whose index is off): several "
                   "times faster; build it later with `search-index DB on`.")
@output_format()
def import_(db: str, path: Path, conversation_id: str | None, no_index: bool, fmt: str) -> None:
    """Import PATH into DB as a new conversation (DB is created if needed).

    \b
    PATH is one of:
      an OpenHands SDK conversation folder (events/event-NNNNN-<id>.json
        and base_state.json), or its events/ folder;
      a legacy OpenHands trajectory (a JSON list of V0 events);
      JSON Lines of event dicts (ours, or the SDK's).

    The import is one transaction: if any file or line is bad, the error names it and
    nothing is imported. A new DB appears only once the import is complete.

    Indexing the events for search is most of a large import's time (some 0.2 ms an
    event). With --no-search-index a new DB is made without the index: `search` then
    refuses until `openhands-memory search-index DB on` builds it over every event, in
    one transaction, with a progress bar.

    \b
    Example:
      openhands-memory import agent.db ~/.openhands/conversations/<id>
      openhands-memory import agent.db trajectory.json --as bug-42
      openhands-memory import big.db history.jsonl --no-search-index
      openhands-memory search-index big.db on
    """
    from ..errors import ConversationExists
    from ..io import importer
    from .opening import is_url, judge, writing_store

    judge(db, must_exist=False)  # the database, then the input, before anything is written
    tty = sys.stderr.isatty()  # (no bar, nothing to count for it)
    total = importer.count_events(path, count=tty)  # also judges the path
    show_bar = total is not None and total >= PROGRESS_MIN and tty
    new_file = not is_url(db) and not Path(db).expanduser().exists()
    with writing_store(db, create=True) as store:
        if no_index and store.search_index:
            if not new_file:
                raise click.ClickException(
                    f"{db} keeps a search index: --no-search-index makes a new DB without one (or switch "
                    f"it off for the whole DB first: openhands-memory search-index {db} off); nothing was imported")
            store.set_search_index(False)
        try:
            if show_bar:
                with click.progressbar(length=total, label="importing", file=sys.stderr, show_pos=True) as bar:
                    result = importer.import_path(store, path, conversation_id, progress=bar.update)
            else:
                result = importer.import_path(store, path, conversation_id)
        except ConversationExists as e:
            raise click.ClickException(f"{e}; import it under another id with --as ID") from None
        v = store.conversation(result.conversation_id).view()
    if no_index:
        result.notes.append(f"{db} keeps no search index: `openhands-memory search-index {db} on` builds it")
    if fmt == "json":
        echo_json({**result.as_dict(), "view_events": len(v)})
        return
    cond = f" ({result.condensations} condensation{'s' if result.condensations != 1 else ''})" if result.condensations else ""
    click.echo(f"imported {result.events:,} events{cond} from {path} ({FORMAT_NAMES[result.format]})")
    click.echo(f"conversation {result.conversation_id}: the agent sees {len(v):,} events now")
    for text in result.notes:
        note(f"note: {text}")


@click.command()
@click.argument("db", type=DATABASE)
@click.argument("conversation", metavar="CONV", type=TEXT)
@click.option("--file-format", type=click.Choice(["jsonl", "openhands"]), default="jsonl", show_default=True,
              help="jsonl: one event a line; openhands: an SDK conversation folder.")
@old_spelling("-f", into="file_format", new="--file-format", type=click.Choice(["jsonl", "openhands"]))
@click.option("-o", "--output", type=path(),
              help="Where to write (jsonl: a file, default stdout; openhands: a new folder, default ./CONV).")
@click.option("--force", is_flag=True, help="jsonl: overwrite an existing file.")
@output_format(moved={"jsonl": "file_format", "openhands": "file_format"})
def export(db: str, conversation: str, file_format: str, output: str | None, force: bool, fmt: str) -> None:
    """Export conversation CONV, as JSON Lines or as an OpenHands SDK folder.

    With -o, what was written is said (--json: as JSON); without it, JSON Lines go to
    stdout.

    The OpenHands folder is laid out and named as the SDK writes it; condensations made here
    are written in the SDK's shape (forgotten_event_ids), so importing the folder again gives
    the same events, ids and views.

    \b
    Example:
      openhands-memory export agent.db fix-bug -o fix-bug.jsonl
      openhands-memory export agent.db fix-bug --file-format openhands -o fix
    """
    from ..files import check_output, database_files, refuse_overwrite, replace_whole
    from ..io import jsonl, sdk
    from .opening import is_url

    as_json = fmt == "json"
    if as_json and file_format == "jsonl" and (output is None or str(output) == "-"):
        raise click.UsageError("--json reports on a written file: give -o FILE (stdout holds the events)")
    folder = file_format == "openhands"
    # Judged before anything is read (files.check_output): a name no file can have, or a
    # folder missing or not writable, is one line naming it, not a traceback.
    to_stdout = output is None or (output == "-" and not folder)
    target = None if to_stdout else check_output(output, what="-o", folder=folder)
    store = open_reader(db)
    try:
        conv = open_conversation(store, conversation)
        if folder:
            target = target or check_output(conv.id, what="the folder named after the conversation", folder=True)
            result = sdk.export_folder(conv, target)
            if as_json:
                echo_json({"conversation": conv.id, "format": file_format, **result.as_dict()})
                return
            click.echo(f"exported {result.events:,} events to {target}{os.sep} (OpenHands SDK layout)")
            for text in result.notes:
                note(f"note: {text}")
            return
        if target is None:
            jsonl.write_jsonl(conv, sys.stdout)
            return
        if not is_url(db):
            refuse_overwrite(target, database_files(db))
        if target.exists() and not force:
            raise click.ClickException(f"{target} already exists (use --force to overwrite it)")
        n = replace_whole(target, lambda f: jsonl.write_jsonl(conv, f))
        if as_json:
            echo_json({"conversation": conv.id, "format": file_format, "path": str(target), "events": n, "notes": []})
            return
        click.echo(f"exported {n:,} events to {target}")
    finally:
        store.close()
