"""replay: a recorded history run again under other strategies (openhands_memory/replay).

The source is opened read-only. The strategies run in a scratch database: a throwaway one,
or ``--scratch FILE``, which keeps the model replies that ``--llm`` summaries cost, so that
a second replay of the same history calls no model.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import click

from .errors import UserError
from .commands_condense import CONFIG_HELP, NAME_HELP, SET_HELP, TYPE_HELP, build_condenser, llm_condensers
from .opening import conversation as open_conversation
from .opening import is_url, open_reader, open_store, shown
from .output import Column, Table, progress_bar, say
from .params import DATABASE, TEXT, number, path
from .vocabulary import deprecated, old_spelling, output_format

if TYPE_CHECKING:
    from ..replay.report import Prices, Replay, ReplaySet

#: What runs when no strategy is named (label: type): the three that published comparisons
#: disagree on; the summary is the offline summarizer's unless --llm names a model.
DEFAULTS = {"none": "noop", "masking": "observation_masking", "summary": "llm"}
DEFAULT_SCRATCH = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "openhands-memory" / "replay.db"


def _config_sections(configs: Sequence[Path], names: Sequence[str]) -> list[tuple[Path, str | None]]:
    """(file, section) for each strategy --config and --name choose: each --config's
    [condenser], or with --name, each named [condenser.NAME] of the one --config. The old
    spelling FILE:NAME (a file that is not there, whose name before its last colon is) is
    read as --config FILE --name NAME."""
    out: list[tuple[Path, str | None]] = []
    for config in configs:
        head, colon, name = str(config).rpartition(":")
        if colon and name and not config.exists() and Path(head).is_file():
            deprecated(f"--config {config}", f"--config {head} --name {name}")
            out.append((Path(head), name))
        else:
            out.append((config, None))
    if names:
        plain = [c for c, section in out if section is None]
        if len(plain) != 1:
            raise click.UsageError("--name picks [condenser.NAME] sections of one --config: give a single --config")
        out = [(c, section) for c, section in out if section is not None] + [(plain[0], n) for n in names]
    return out


def _strategies(sections: Sequence[tuple[Path, str | None]], types: Sequence[str],
                pairs: tuple[str, ...]) -> list[tuple[str, Any]]:
    """(label, condenser) for each config section and each --type TYPE[,KEY=VALUE...]."""
    if pairs and len(types) != 1:
        raise click.UsageError("--set adjusts a single --type (several: --type TYPE,KEY=VALUE,...)")
    out: list[tuple[str, Any]] = []
    for config, name in sections:
        condenser, _ = build_condenser(config, name, None, ())
        out.append((config.stem + (f":{name}" if name else ""), condenser))
    if not sections and not types:
        return [(label, build_condenser(None, None, kind, ())[0]) for label, kind in DEFAULTS.items()]
    for spec in types:
        condenser, _ = build_condenser(None, None, spec, pairs)
        out.append((spec if not pairs else ",".join([spec, *pairs]), condenser))
    labels = [label for label, _ in out]
    return [(label if labels.count(label) == 1 else f"{label} #{k}", c) for k, (label, c) in enumerate(out, 1)]


def _model_summaries(strategies: list[tuple[str, Any]], model: str) -> None:
    """--llm: every strategy that summarizes without a model of its own uses ``model``
    (reached as OPENHANDS_MEMORY_LLM_API_BASE and _API_KEY say, or LLM_BASE_URL and LLM_API_KEY)."""
    from ..llm import LLMConfig

    config = LLMConfig.from_env({**os.environ, "OPENHANDS_MEMORY_LLM_MODEL": model})
    for _, condenser in strategies:
        for c in llm_condensers(condenser):
            if c.llm_config is None:
                object.__setattr__(c, "llm_config", config)


def _prices(model: str | None) -> "Prices | None":
    if model is None:
        return None
    from ..llm import token_prices
    from ..replay.report import Prices

    found = token_prices(model)
    if found is None:
        raise UserError(f"--model {model}: litellm's price map has no such model (name it as litellm does, "
                        "e.g. gpt-4o or anthropic/claude-sonnet-4-20250514)")
    return Prices(model=model, input=found[0], cached_input=found[1], output=found[2])


def _counter(tokenizer: str | None, model: str | None) -> Any:
    from ..condensers.tokenizers import counter_for

    return counter_for(tokenizer if tokenizer is not None else model)


@click.command()
@click.argument("db", type=DATABASE)
@click.argument("conversations", metavar="[CONV]...", nargs=-1, type=TEXT)
@click.option("--all-conversations", "every", is_flag=True,
              help="Replay every conversation of DB (sums at the end).")
@old_spelling("--all", into="every", new="--all-conversations", is_flag=True, value=True)
@click.option("-c", "--config", "configs", multiple=True, type=path(dir_okay=False, path_type=Path), metavar="FILE",
              help=CONFIG_HELP + " A strategy; repeatable.")
@click.option("--name", "names", multiple=True, type=TEXT, metavar="NAME",
              help=NAME_HELP + " A strategy; repeatable, to compare sections of one file.")
@click.option("-t", "--type", "types", multiple=True, metavar="TYPE[,KEY=VALUE...]", type=TEXT,
              help=TYPE_HELP + " A strategy; repeatable. Without --config or --type: noop, observation_masking "
                   "and llm (as none, masking, summary).")
@click.option("-s", "--set", "pairs", multiple=True, metavar="KEY=VALUE", type=TEXT, help=SET_HELP)
@click.option("--model", type=TEXT, metavar="MODEL",
              help="Price the calls as this model (litellm's price map) and count tokens with its tokenizer.")
@click.option("--tokenizer", type=TEXT, metavar="MODEL",
              help="Count tokens with this model's tokenizer, or chars/4 (the default without --model).")
@click.option("--llm", "llm_model", metavar="MODEL", type=TEXT,
              help="Summaries written by this model through litellm (key and base URL from "
                   "OPENHANDS_MEMORY_LLM_API_BASE / _API_KEY), not the offline summarizer; replies are kept "
                   "in --scratch.")
@click.option("--max-cost", type=number(0), default=1.0, show_default=True, metavar="USD",
              help="With --llm: USD the summary calls may spend before the replay stops.")
@click.option("--scratch", type=path(dir_okay=False),
              help="The scratch database (kept): a new path, or one an earlier replay made. Default with "
                   "--llm: ~/.cache/openhands-memory/replay.db; otherwise a throwaway one.")
@click.option("--html", "html_file", type=path(dir_okay=False),
              help="Also write one self-contained HTML page: input tokens per call, per strategy.")
@click.option("--svg", "svg_file", type=path(dir_okay=False),
              help="Also write the chart alone as an SVG image (of the first conversation).")
@click.option("--save", is_flag=True,
              help="Keep each conversation's replay in DB, for `serve` to list and draw (/c/ID/replay).")
@output_format()
def replay(db: str, conversations: tuple[str, ...], every: bool, configs: tuple[Path, ...], names: tuple[str, ...],
           types: tuple[str, ...],
           pairs: tuple[str, ...], model: str | None, tokenizer: str | None, llm_model: str | None,
           max_cost: float, scratch: Path | None, html_file: Path | None, svg_file: Path | None,
           save: bool, fmt: str) -> None:
    """Replay CONV's recorded history under other strategies: at every model call the
    recorded agent made, what each strategy would have sent, cached, forgotten and cost,
    beside what the recorded run sent. DB is only read, unless --save keeps the replays in it
    (in one transaction, after they all ran) for `serve` to show.

    Summaries come from the offline summarizer (free, the same every time) unless --llm
    names a model. Cached tokens are those of the previous call's input left unchanged at
    its start, which a provider's prompt cache could reuse.

    \b
    Example:
      openhands-memory replay openhands-memory-demo.db demo --model gpt-4o
      openhands-memory replay agent.db fix-bug -t noop -t recent,max_events=40
      openhands-memory replay agent.db fix-bug -c a.toml -c b.toml --html r.html
      openhands-memory replay agent.db fix-bug -c config.toml --name a --name b
      openhands-memory replay agent.db fix-bug --llm openai/gpt-4o-mini
      openhands-memory replay agent.db --all-conversations --json
      openhands-memory replay agent.db fix-bug -t noop -t recent --save
    """
    if every and conversations:
        raise click.UsageError("give conversations or --all-conversations, not both")
    if not every and not conversations:
        raise click.UsageError("name a conversation (or several), or give --all-conversations")
    html_file, svg_file, scratch = _judged(html_file, svg_file, scratch)
    sections = _config_sections(configs, names)
    strategies = _strategies(sections, types, pairs)
    if llm_model is not None:
        _model_summaries(strategies, llm_model)
    prices = _prices(model)
    counter = _counter(tokenizer, model)
    # --save: a store that may write, opened first, so that a database that cannot take the
    # replay (read-only, not ours) is said before the replay runs.
    source = open_store(db) if save else open_reader(db)
    ids = [c.id for c in source.conversations()] if every else [open_conversation(source, c).id for c in conversations]
    if not ids:
        raise UserError(f"{shown(db)} holds no conversation")
    if scratch is None and llm_model is not None:
        scratch = DEFAULT_SCRATCH
        scratch.parent.mkdir(parents=True, exist_ok=True)
    _refuse_outputs(db, [c for c, _ in sections], scratch, html_file, svg_file)
    results, warning, kept = _replay_all(source, ids, strategies, counter, prices, scratch,
                                         max_cost if llm_model else None)
    from ..replay.run import aggregate

    report: "Replay | ReplaySet" = results[0] if len(results) == 1 and not every else aggregate(results)
    written = _write_outputs(report, results[0], html_file, svg_file, kept)
    if save:
        from ..replay.saved import save as keep

        keep(source, results)
    if fmt == "json":
        click.echo(report.model_dump_json(indent=2))
    else:
        _echo(report)
        if written:
            say(f"Wrote {' and '.join(str(p) for p in written)}.")
        if save:
            say(f"Saved {len(results)} replay{'s' if len(results) != 1 else ''} in {shown(db)}: "
                f"`openhands-memory serve` shows {'it' if len(results) == 1 else 'them'} at /c/ID/replay.")
    if warning is not None:
        click.echo(f"Warning: {warning}", err=True)


def _judged(html_file: str | None, svg_file: str | None,
            scratch: str | None) -> tuple[Path | None, Path | None, Path | None]:
    """The outputs and the scratch database as paths, each judged a file that can be written
    there (files.check_output) before anything runs: a name no file can have (too long, a
    folder's) or a folder missing or not writable used to be found once the replay had run."""
    from ..files import check_output

    return tuple(None if p is None else check_output(p, what=option, database=option == "--scratch")  # type: ignore[return-value]
                 for option, p in (("--html", html_file), ("--svg", svg_file), ("--scratch", scratch)))


def _refuse_outputs(db: str, configs: Sequence[Path], scratch: Path | None, html_file: Path | None,
                    svg_file: Path | None) -> None:
    """Before anything runs: no output may be a file the replay reads (by any of its names),
    nor the scratch database, nor the other output."""
    from ..files import clashes, database_files, refuse_overwrite

    reads = {} if is_url(db) else database_files(db)
    reads.update({config: f"the config {config}" for config in configs})
    if scratch is not None:
        reads.update(database_files(scratch))
    for option, path in (("--html", html_file), ("--svg", svg_file)):
        if path is not None:
            refuse_overwrite(path, reads, what=option)
    same = clashes([html_file, svg_file])
    if same is not None:
        raise UserError(f"--html {same[0]} and --svg {same[1]} name the same file; nothing was written")


def _write_outputs(report: "Replay | ReplaySet", first: "Replay", html_file: Path | None,
                   svg_file: Path | None, kept: str | None) -> list[Path]:
    """The page and the chart, each replacing its file only once whole; a failure says what
    was written before it and what the scratch database (``kept``) holds."""
    from ..files import write_text

    written: list[Path] = []
    if html_file is not None:
        from ..replay.chart import html_page

        write_text(html_file, html_page(report), done=kept or "")
        written.append(html_file)
    if svg_file is not None:
        from ..replay.chart import svg_chart

        write_text(svg_file, svg_chart(first),
                   done="; ".join(filter(None, [f"{html_file} was written" if written else "", kept])))
        written.append(svg_file)
    return written


def _replay_all(source: Any, ids: list[str], strategies: list[tuple[str, Any]], counter: Any,
                prices: "Prices | None", scratch: Path | None,
                max_cost: float | None) -> tuple[list["Replay"], str | None, str | None]:
    """The replays, a warning the kept scratch database left (None: none), and what it holds
    (None: no --scratch)."""
    from contextlib import ExitStack

    from ..llm import ReplyCache
    from ..replay.run import ModelUse
    from ..replay.scratch import scratch_database

    update, finish = progress_bar("replaying")
    total = sum(len(_calls(source, cid)) for cid in ids) * (len(strategies) + 1) if update else 0
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        if update is not None and done % 64 == 0:
            update(done, total)

    kept = None
    with ExitStack() as stack:
        use: Callable[[], ModelUse] | None = None
        if scratch is not None:
            kept = stack.enter_context(scratch_database(scratch, source))
            cache = ReplyCache(load=kept.reply, keep=kept.keep_reply, max_cost=max_cost)
            stack.enter_context(cache.active())
            use = lambda: ModelUse(cache.calls, cache.hits, cache.spent)  # noqa: E731
        try:
            results = [source.conversation(cid).replay(strategies, scratch=kept.store if kept else None,
                                                       counter=counter, prices=prices, progress=advance,
                                                       model_use=use) for cid in ids]
        finally:
            if finish is not None:
                finish()
    return results, kept.warning if kept is not None else None, kept.kept() if kept is not None else None


def _calls(source: Any, cid: str) -> list:
    from ..replay.run import History

    return History.read(source.conversation(cid)).calls


# --- the table ---------------------------------------------------------------------------------


def compact(n: float | None) -> str:
    """1234 -> 1.2k, 137000000 -> 137M: token counts in a column a few characters wide."""
    if n is None:
        return "—"
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= size:
            value = n / size
            return f"{value:.1f}{suffix}" if value < 100 else f"{value:.0f}{suffix}"
    return f"{n:.0f}"


def money(usd: float | None) -> str:
    return "—" if usd is None else f"${usd:,.2f}" if usd >= 1 else f"${usd:.4f}"


def _echo(report: "Replay | ReplaySet") -> None:
    from ..replay.report import Replay

    if isinstance(report, Replay):
        head = f"{report.conversation}: {report.events:,} events, {report.calls:,} model calls"
        strategies, prices, tokenizer = report.strategies, report.prices, report.tokenizer
    else:
        calls = sum(r.calls for r in report.conversations)
        head = f"{len(report.conversations)} conversations, {calls:,} model calls (sums)"
        strategies = report.totals
        prices = report.conversations[0].prices if report.conversations else None
        tokenizer = report.conversations[0].tokenizer if report.conversations else "chars/4"
    say(head + f"; tokens by {tokenizer}" + (f"; priced as {prices.model}" if prices else "") + ".")
    table = Table([
        Column("strategy", flex=True, min=8), Column("input", ">"), Column("cached", ">"), Column("peak", ">"),
        Column("cond", ">"), Column("forgot", ">"), Column("lost", ">"), Column("broken", ">"),
        Column("cost", ">"), Column("w/ cache", ">"),
    ])
    for s in strategies:
        t = s.totals
        share = f"{t.cached_tokens / t.input_tokens:.0%}" if t.input_tokens else "—"
        table.add([s.label + (" (recorded)" if s.baseline and s.label != "recorded" else ""),
                   compact(t.input_tokens), share, compact(t.peak_context), t.condensations,
                   compact(sum(t.forgotten.values())), compact(t.lost), t.pairs_broken + t.pins_broken,
                   money(t.cost_usd), money(t.cost_cached_usd)])
    table.echo()
    notes = []
    summarized = [s for s in strategies if s.totals.summary_calls]
    for s in summarized:
        t = s.totals
        who = s.summarizer or "a summarizer"
        line = (f"{s.label}: {t.summary_calls:,} summaries by {who} "
                f"({compact(t.summary_input_tokens)} tokens in, {compact(t.summary_output_tokens)} out)")
        if t.model_calls or t.summary_cache_hits:
            line += f"; {t.model_calls:,} model calls made, {t.summary_cache_hits:,} replies reused"
            if t.model_spent_usd is not None:
                line += f", {money(t.model_spent_usd)} spent"
        notes.append(line + ".")
    if prices is None:
        notes.append("Costs need --model (a model litellm prices).")
    notes.append("cached: input a prompt cache could reuse (the previous call's, unchanged); "
                 "lost: forgotten events whose strings a later response used while no event in view held them; "
                 "broken: tool pairs and pins split (always 0).")
    for line in notes:
        say(line)
