"""sync: what an OpenHands agent server holds, pulled into DB through its REST API."""

from __future__ import annotations

import click

from .errors import UserError
from .opening import judge, open_store, shown
from .output import echo_json, progress_bar
from .params import DATABASE, TEXT
from .vocabulary import output_format


@click.command()
@click.argument("db", type=DATABASE)
@click.argument("conversation", required=False, type=TEXT)
@click.option("--agent-server", "url", required=True, type=TEXT, metavar="URL",
              help="The agent server's address, e.g. http://127.0.0.1:8000.")
@click.option("--api-key", "key", type=TEXT, metavar="KEY",
              help="The agent server's session key (OH_SESSION_API_KEYS_0), sent as X-Session-API-Key.")
@output_format()
def sync(db: str, conversation: str | None, url: str, key: str | None, fmt: str) -> None:
    """Pull into DB what it lacks of an OpenHands agent server's conversations (every one, or
    CONVERSATION, its UUID): the events its webhooks did not deliver (its queue dropped them while the
    receiver was down, or the receiver started late), and each conversation's info.

    Idempotent: events stored already are skipped, so a sync stopped midway is resumed by
    running it again. DB is created if missing. Events still waiting for a parent the agent
    server does not list are counted; `doctor` names them.

    \b
    Example:
      openhands-memory sync agents.db --agent-server http://127.0.0.1:8000
      openhands-memory sync agents.db --agent-server http://gpu-1:8000 --api-key K
    """
    from ..io.agent_server_sync import source
    from ..io.agent_server_sync import sync as pull

    judge(db, must_exist=False)
    src = source(url, key=key, conversation=conversation)  # before DB is touched: nothing made if it fails
    store = open_store(db, create=True)
    update, finish = progress_bar("syncing") if fmt != "json" else (None, None)
    try:
        result = pull(store, src, progress=update)
    finally:
        if finish is not None:
            finish()
    if fmt == "json":
        echo_json(result.as_dict())
    else:
        click.echo(f"{result.conversations} conversation(s) of {url}: {result.events} events listed, "
                   f"{result.stored} new in {shown(db)}")
    if result.waiting:
        raise UserError(f"{result.waiting} event(s) still wait for a parent the agent server does not list; "
                        "those conversations stay incomplete (see `doctor`)")
