"""demo: replay a bundled coding-agent session through the default condenser, as an agent would."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import click


from .output import echo_json, heading, id_runs, term_width
from .params import DATABASE
from .vocabulary import output_format

DEFAULT_DB = "openhands-memory-demo.db"
CONVERSATION = "demo"
MARKER = "openhands_memory_demo"


def _is_demo(path: Path) -> bool:
    """Whether ``path`` is a database an earlier ``demo`` made (and nothing else)."""
    from ..database import inspect_sqlite_file

    try:
        state = inspect_sqlite_file(path)
    except Exception:
        return False
    if state.revision is None:
        return path.stat().st_size == 0
    from ..conversation import EventStore

    try:
        with EventStore(path, create=False, readonly=True) as store:
            found = [(c.id, c.metadata.get(MARKER)) for c in store.conversations()]
    except Exception:
        return False
    return found == [(CONVERSATION, 1)]


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def starts_llm_call(event, previous) -> bool:  # type: ignore[no-untyped-def]
    """Whether ``event`` is the first event of a model response (so the agent called the model
    just before it: the moment it asks for its view)."""
    rid = getattr(event, "llm_response_id", None)
    if event.source != "agent" or rid is None or event.kind not in ("ActionEvent", "MessageEvent"):
        return False
    return getattr(previous, "llm_response_id", None) != rid


@click.command()
@click.argument("db", required=False, default=DEFAULT_DB, metavar="[DB]", type=DATABASE)
@output_format()
def demo(db: str, fmt: str) -> None:
    """Build a demo database (default: ./openhands-memory-demo.db) and show what it holds.

    It replays a bundled session of a coding agent fixing a date-parsing bug (about 300
    events: terminal and file-editor calls, pytest tracebacks, a docs page, user follow-ups)
    event by event, asking for the view before every model call as an agent does, with the
    default condenser: old browser pages masked, and a rolling summary written by the offline
    summarizer. No API key, no network. An earlier demo file is replaced; any other file is
    left alone.

    \b
    Example:
      openhands-memory demo
      openhands-memory demo /tmp/demo.db --json
    """
    from ..condensers import default_condenser
    from ..data import DEMO_CONVERSATION
    from ..events import event_from_json
    from ..conversation import EventStore
    from ..inspection import history, stats
    from .commands_db import echo_stats
    from .commands_events import echo_view

    as_json = fmt == "json"
    path = Path(db).expanduser()
    if path.exists():
        if not _is_demo(path):
            raise click.ClickException(
                f"{db} exists and is not a demo database; it was left untouched (give another path)"
            )
        _remove(path)
    started = time.perf_counter()
    with open(DEMO_CONVERSATION, encoding="utf-8") as f:
        events = [event_from_json(line) for line in f if line.strip()]
    store = EventStore(path)
    try:
        conv = store.create_conversation(
            CONVERSATION,
            metadata={MARKER: 1, "story": "a coding agent fixes a failing date-parsing test in a small Python repo"},
        )
        condenser = default_condenser()
        echo = (lambda *a, **k: None) if as_json else click.echo
        if not as_json:
            heading(f"Replaying a coding agent's session ({len(events)} events) into {path.name},")
            heading(f"conversation {CONVERSATION!r}, with the default condenser:")
        condensations = 0
        steps = 0
        previous = None
        for event in events:
            if starts_llm_call(event, previous):
                before = len(conv)
                view = conv.step(condenser)  # what the model is sent now
                steps += 1
                if len(conv) > before:  # the step stored a condensation
                    condensations += 1
                    cond = next(history(store, conv.id, before, before)).condensation or {}
                    runs = cond.get("forgotten_ranges", [])
                    forgot = sum(e - s + 1 for s, e in runs)
                    echo(
                        f"  event {before:>3}: forgot {forgot} events "
                        f"({id_runs(i for s, e in runs for i in range(s, e + 1))})"
                        + (" into a summary" if cond.get("summary") else "")
                        + f"; the view is {len(view)} events"
                    )
            conv.append(event)
            previous = event
        elapsed = time.perf_counter() - started
        stored = len(conv)
        if as_json:
            final = conv.view()
            echo_json({
                "path": str(path), "conversation": conv.id, "replayed": len(events),
                "condensations": condensations, "stored": stored, "model_calls": steps,
                "view_events": len(final), "view_summaries": sum(1 for e in final.events if e.seq is None),
                "seconds": round(elapsed, 3),
            })
            return
        click.echo(f"  {stored:,} events stored ({len(events):,} replayed, {condensations} "
                   f"condensation{'s' if condensations != 1 else ''}); {steps:,} model calls "
                   f"in {elapsed:.1f} s")
        width = term_width()
        click.echo()
        final = conv.view()
        echo_view(conv.id, final)
        from ..condensers.tokenizers import counter_for
        from ..view.tokens import count_events

        counter = counter_for("chars/4")
        everything = [e for e in conv.events() if type(e).llm_visible]
        click.echo(textwrap.fill(
            f"The model is sent {len(final)} events, about {count_events(counter, final.events):,} tokens, "
            f"instead of all {len(everything)} ({count_events(counter, everything):,} tokens; chars/4 estimate).",
            width,
        ))
        click.echo()
        echo_stats(f"stats of conversation {conv.id}", stats(store, [conv.id]).as_dict())
    finally:
        store.close()
    if as_json:
        return
    click.echo()
    click.echo("Next, try:")
    for line in (
        f"openhands-memory history {db} demo",
        f"openhands-memory view {db} demo --at 120",
        f"openhands-memory view {db} demo --format messages",
        f"openhands-memory condense {db} demo --dry-run",
        f"openhands-memory sql {db} \"SELECT * FROM condensation\"",
    ):
        click.echo(f"  {line}")
