"""condense and request-condensation."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import click

from .opening import conversation as open_conversation
from .opening import open_reader, open_store
from .describe import preview
from .errors import UserError
from .output import echo_json, echo_pairs, id_runs, number, one_line, say
from .params import DATABASE, TEXT, path
from .vocabulary import old_spelling, output_format


def _value(text: str) -> Any:
    """A --set value read as TOML (numbers, booleans, strings in quotes), else as plain text."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def settings(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``("max_size=80", "llm_config.model=gpt-4o")`` -> nested settings."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{pair!r} is not key=value", param_hint="--set")
        *parents, leaf = [k.strip() for k in key.split(".")]
        node = out
        for p in parents:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise click.BadParameter(f"{key!r} sets inside a value that is not a table", param_hint="--set")
        node[leaf] = _value(text.strip())
    return out


def split_type(spec: str) -> tuple[str, tuple[str, ...]]:
    """``--type``'s value: ``recent,max_events=40`` -> ``("recent", ("max_events=40",))``."""
    kind, *extra = [p.strip() for p in spec.split(",")]
    return kind, tuple(extra)


def build_condenser(config: Path | None, name: str | None, kind: str | None, pairs: tuple[str, ...]) -> tuple[Any, str]:
    """The condenser the options describe (``kind``: ``--type``'s value, ``TYPE[,KEY=VALUE...]``),
    and a label for it."""
    if config is not None and kind is not None:
        raise click.UsageError("give --config or --type, not both")
    if name is not None and config is None:
        raise click.UsageError("--name picks a [condenser.NAME] section of --config")
    if pairs and kind is None:
        raise click.UsageError("--set adjusts a --type")
    if config is not None:
        from ..config import load_condenser

        condenser = load_condenser(config, name)
        return condenser, f"{config}" + (f" [condenser.{name}]" if name else "")
    if kind is not None:
        from ..config import condenser_from_section

        base, extra = split_type(kind)
        condenser = condenser_from_section({"type": base, **settings(extra + pairs)}, {}, "--type")
        return condenser, kind
    from ..condensers import default_condenser

    return default_condenser(), "the default condenser"


#: The options that choose a strategy, spelled the same in condense and replay (where they
#: repeat, one strategy each).
CONFIG_HELP = "An OpenHands-style config.toml: its [condenser] section (or [condenser.NAME] with --name)."
NAME_HELP = "Use the [condenser.NAME] section of --config."
TYPE_HELP = ("A condenser type, settings after commas: noop, observation_masking, browser_output_masking, recent, "
             "amortized, conversation_window, llm, structured, llm_attention, pipeline (or an alias such as "
             "recent_events); e.g. recent,max_events=40.")
SET_HELP = "A setting of the --type (repeatable), e.g. --set max_size=80 --set llm_config.model=gpt-4o-mini."


@click.command()
@click.argument("db", type=DATABASE)
@click.argument("conversation", metavar="CONV", type=TEXT)
@click.option("-c", "--config", type=path(dir_okay=False, path_type=Path), metavar="FILE", help=CONFIG_HELP)
@click.option("--name", type=TEXT, metavar="NAME", help=NAME_HELP)
@old_spelling("-n", into="name", new="--name", type=TEXT)
@click.option("-t", "--type", "kind", metavar="TYPE[,KEY=VALUE...]", type=TEXT, help=TYPE_HELP)
@click.option("-s", "--set", "pairs", multiple=True, metavar="KEY=VALUE", type=TEXT, help=SET_HELP)
@click.option("--dry-run", is_flag=True, help="Show what would be forgotten; write nothing, call no model.")
@click.option("--with-summary", is_flag=True,
              help="With --dry-run: do call the model, to show its summary (or ranking).")
@output_format()
def condense(db: str, conversation: str, config: Path | None, name: str | None, kind: str | None,
             pairs: tuple[str, ...], dry_run: bool, with_summary: bool, fmt: str) -> None:
    """Run a condenser on CONV's current view and store the condensation it makes.

    Without --config or --type: the default pipeline, summarizing offline (no API key).
    The output names who wrote the summary (a model, or the offline summarizer). When the
    model fails and nothing is written, the command says why and exits with status 1; when
    a fallback wrote the condensation instead, it says so.

    \b
    Example:
      openhands-memory condense agent.db fix-bug --dry-run
      openhands-memory condense agent.db fix-bug --type recent --set max_events=40
      openhands-memory condense agent.db fix-bug --config config.toml --name small
    """
    if with_summary and not dry_run:
        raise click.UsageError("--with-summary goes with --dry-run")
    condenser, label = build_condenser(config, name, kind, pairs)
    # A dry run reads through a read-only store: the token counts it makes stay in memory;
    # without --with-summary it calls no model (a preview).
    report = _run(db, conversation, condenser, label, dry_run=dry_run, preview=dry_run and not with_summary)
    if fmt == "json":
        echo_json(report)
    else:
        _echo(report, label)
    if report.get("error"):
        raise UserError(report["error"])


def llm_condensers(condenser: Any) -> list[Any]:
    """The strategies in ``condenser`` (a pipeline is walked) that can call a model."""
    from ..condensers.llm_base import LLMCondenser

    if isinstance(condenser, LLMCondenser):
        return [condenser]
    return [c for sub in getattr(condenser, "condensers", None) or [] for c in llm_condensers(sub)]


def summarizers(condenser: Any) -> str | None:
    """Who writes summaries (or rankings) in ``condenser``, for the output; None if nobody."""
    names = []
    for c in llm_condensers(condenser):
        who = c.summarizer
        if c.llm_config is None:
            who += f" ({c.type} has no llm_config)"
        if who not in names:
            names.append(who)
    return ", ".join(names) or None


def _in_memory(before: Any, after: Any) -> dict[str, Any]:
    """What an in-memory rewrite (masking, recent events) changes in what the model is sent."""
    kept = {e.seq for e in after.events if e.seq is not None}
    dropped = [e.seq for e in before.events if e.seq is not None and e.seq not in kept]
    old = {e.seq: e.to_json() for e in before.events if e.seq is not None}
    changed = [e.seq for e in after.events if e.seq is not None and old.get(e.seq) not in (None, e.to_json())]
    return {"sent_events": len(after), "left_out_ids": dropped, "rewritten_ids": changed}


def _run(db: str, conversation: str, condenser: Any, label: str, *, dry_run: bool, preview: bool) -> dict[str, Any]:
    store = open_reader(db) if dry_run else open_store(db)
    try:
        conv = open_conversation(store, conversation)
        done = conv.condense(condenser, dry_run=dry_run, preview=preview)
        before = done.view
        base = {"conversation": conv.id, "condenser": label, "dry_run": dry_run,
                "summarizer": summarizers(condenser), "view_events": len(before)}
        result = done.condensation
        if result is None:
            report = {**base, "condensed": False, "model_failure": done.failure, "error": None}
            if done.failure:
                report["error"] = f"condense: {done.failure}; no condensation was stored"
            elif done.needs_model:
                report["needs_model"] = True
            elif done.result is not None and done.result is not before:
                report["in_memory"] = _in_memory(before, done.result)
            return report
        from ..condensers.llm_base import PREVIEW_SUMMARY

        note = result.note
        after_view = None if dry_run else conv.view()
        return {
            **base, "condensed": True, "error": None,
            "strategy": note.strategy if note else None, "reason": note.reason if note else None,
            "fallback": done.fallback, "model_failure": done.failure,
            "forgotten_ids": done.forgotten_ids, "forgotten_count": len(done.forgotten_ids),
            "summary": result.summary, "summary_offset": result.summary_offset,
            "summary_written": not (dry_run and result.summary == PREVIEW_SUMMARY),
            "tokens_before": done.tokens_before, "tokens_after": done.tokens_after,
            "token_counter": done.token_counter, "stored_as": done.stored_as,
            "view_events_after": len(after_view) if after_view is not None else None,
            "pins_carried": [_pin_json(p) for p in done.pins_carried],
            "pins_reinjected": [_pin_json(p) for p in done.pins_reinjected],
        }
    finally:
        store.close()


def _pin_json(pin: Any) -> dict[str, Any]:
    return {"id": pin.seq, "mode": pin.mode, "label": pin.label, "group": pin.group}


def _pin_names(pins: list[dict[str, Any]]) -> str:
    """``#1, #11 (plan)``."""
    return ", ".join(f"#{p['id']}" + (f" ({p['label']})" if p["label"] else "") for p in pins)


def _echo(report: dict[str, Any], label: str) -> None:
    dry_run = report["dry_run"]
    who = report["summarizer"]
    if not report["condensed"]:
        if report.get("error"):
            return  # the error line says it all
        if report.get("needs_model"):
            say(f"dry run: {label} asks {who} which events to forget; a dry run does not call "
                "it (add --with-summary to ask it)")
            return
        memory = report.get("in_memory")
        if memory and (memory["left_out_ids"] or memory["rewritten_ids"]):
            head = "dry run: " if dry_run else ""
            say(f"{head}nothing to store: {label} rewrites the view in memory only (never stored)")
            pairs_out: list[tuple[str, Any]] = [
                ("sends", f"{memory['sent_events']:,} of {report['view_events']:,} events to the model")]
            if memory["left_out_ids"]:
                pairs_out.append(("leaves out", id_runs(memory["left_out_ids"])))
            if memory["rewritten_ids"]:
                pairs_out.append(("masks", id_runs(memory["rewritten_ids"])))
            echo_pairs(pairs_out, indent=2, wrap=True)
            return
        say(f"nothing to condense: {label} keeps the view ({report['view_events']:,} events) as it is")
        return
    head = "dry run: would condense" if dry_run else "condensed"
    why = f" ({report['strategy']}, reason: {report['reason']})" if report["strategy"] else ""
    say(f"{head} {report['conversation']} with {label}{why}")
    seqs = report["forgotten_ids"]
    pairs_out = [
        ("forgets", f"{len(seqs):,} of {report['view_events']:,} events: "
                    f"{id_runs(s for s in seqs if s is not None) or '-'}"),
    ]
    # Labels no wider than "written by", from which the summary line's room is counted.
    if report.get("pins_carried"):
        pairs_out.append(("pins kept", f"{_pin_names(report['pins_carried'])}: carried out of the cut"))
    if report.get("pins_reinjected"):
        pairs_out.append(("re-injects", f"{_pin_names(report['pins_reinjected'])}: pinned, shown again "
                                        "after the summary"))
    if report["summary"] is not None:
        where = f"at position {report['summary_offset']}: "
        if not report["summary_written"]:
            pairs_out.append(("summary", where + f"by {who}, not asked in a dry run (--with-summary asks it)"))
        else:
            gist = one_line(preview({"kind": "CondensationSummaryEvent", "summary": report["summary"]}))
            room = 80 - 2 - len("written by") - 2 - len(where)  # the widest label beside it
            pairs_out.append(("summary", where + (gist if len(gist) <= room else gist[: room - 1] + "…")))
            writer = "the offline summarizer" if report.get("fallback") == "offline" else who
            pairs_out.append(("written by", writer or "-"))
    if report.get("fallback"):
        because = f": {report['model_failure']}" if report.get("model_failure") else ""
        pairs_out.append(("fallback", f"{report['fallback']}, because the model failed{because}"))
    pairs_out.append(("tokens", f"{number(report['tokens_before'])} -> {number(report['tokens_after'])} "
                                f"({report['token_counter']})"))
    if not dry_run:
        pairs_out.append(("stored", f"as event {report['stored_as']}; the view now has "
                                    f"{report['view_events_after']:,} events"))
    echo_pairs(pairs_out, indent=2, wrap=True)
    if dry_run:
        click.echo("dry run: nothing was written")


@click.command("request-condensation")
@click.argument("db", type=DATABASE)
@click.argument("conversation", metavar="CONV", type=TEXT)
@output_format()
def request_condensation(db: str, conversation: str, fmt: str) -> None:
    """Append a CondensationRequest to CONV: the next condense (or agent step) must condense.

    \b
    Example:
      openhands-memory request-condensation agent.db fix-bug
    """
    store = open_store(db)
    try:
        conv = open_conversation(store, conversation)
        seq = conv.request_condensation()
    finally:
        store.close()
    if fmt == "json":
        echo_json({"conversation": conv.id, "id": seq})
    else:
        click.echo(f"event {seq}: condensation requested in {conv.id}; the next condense acts on it")
