"""serve: the web inspector (openhands_memory/web) on a local port, read-only; with --ingest
also the receiver of an OpenHands agent server's webhooks (web/ingest.py)."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import socket

import click

from ..web.backfill import DELAY as BACKFILL_DELAY
from .opening import is_url, judge, shown
from .params import DATABASE, TEXT, count, number
from .vocabulary import output_format

LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}
#: Keys ingest accepts beside --api-key, separated by commas or spaces.
KEYS_ENV = "OPENHANDS_MEMORY_INGEST_KEYS"


def ingest_keys(given: tuple[str, ...]) -> list[str]:
    """The keys ``--api-key`` gave and ``$OPENHANDS_MEMORY_INGEST_KEYS`` holds."""
    return [k for k in (*given, *re.split(r"[,\s]+", os.environ.get(KEYS_ENV, ""))) if k]


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def bound_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (0: a free port), or one line saying why not."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise click.ClickException(f"--host {host}: not an address this machine can listen on ({e.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as e:
        sock.close()
        raise click.ClickException(f"cannot listen on {host}:{port}: {e.strerror}") from None
    return sock


@click.command()
@click.argument("db", type=DATABASE)
@click.option("--host", default="127.0.0.1", show_default=True, type=TEXT,
              help="The address to listen on. Anything but loopback is warned about: there is no authentication.")
@click.option("--port", default=8765, show_default=True, type=count(0), help="The port (0: any free one).")
@click.option("--open", "open_browser", is_flag=True, help="Open the inspector in the default browser.")
@click.option("--ingest", is_flag=True,
              help="Also receive an OpenHands agent server's webhooks (POST /events/ID, /conversations) into DB.")
@click.option("--api-key", "api_keys", multiple=True, type=TEXT, metavar="KEY",
              help=f"With --ingest: a key the agent server must send (X-Session-API-Key); repeatable; also ${KEYS_ENV}.")
@click.option("--backfill", metavar="URL", type=TEXT,
              help="With --ingest: the agent server's address; what its webhooks did not bring (before this "
                   "started, or dropped) is pulled from its REST API, with the first key.")
@click.option("--backfill-delay", type=number(0, high=3600), default=BACKFILL_DELAY, show_default=True,
              metavar="SECONDS", help="With --backfill: how long events waiting for a parent wait for the "
                                      "sender's retries before the parent is pulled.")
@output_format()
def serve(db: str, host: str, port: int, open_browser: bool, ingest: bool, api_keys: tuple[str, ...],
          backfill: str | None, backfill_delay: float, fmt: str) -> None:
    """Serve DB's web inspector: what the model saw at each call, what was forgotten, why,
    and what it cost. Read-only: an agent may keep writing beside it; reload for the newest.

    With --ingest, an OpenHands agent server started with
    OH_WEBHOOKS_0_BASE_URL=http://HOST:PORT streams every conversation into DB (created if
    missing); a batch is answered once it is committed. Beyond loopback it needs a key: the
    agent server's session key (OH_SESSION_API_KEYS_0), which it sends with each batch.
    With --backfill URL it also reads that agent server's REST API, in the background: every
    conversation once at the start, and any whose events wait for a parent the webhooks
    dropped; as `sync` does, it stores only what is missing.

    Pages: / (conversations), /c/ID (chart, condensations, branches, pins), /c/ID/call/N
    (the view at model call N), /c/ID/event/SEQ, /c/ID/condensation/SEQ, /c/ID/events,
    /search; each has a .json twin (/c/ID.json, /c/ID/call/N.json, …). --json prints the
    address as a JSON line once the server listens.

    \b
    Example:
      openhands-memory demo
      openhands-memory serve openhands-memory-demo.db --open
      openhands-memory serve postgresql://agents@db/memory --port 9000
      openhands-memory serve agents.db --ingest --port 8766
      openhands-memory serve agents.db --ingest --backfill http://127.0.0.1:8000
    """
    if port > 65535:
        raise click.ClickException(f"--port {port}: a port is at most 65535")
    if api_keys and not ingest:
        raise click.ClickException("--api-key: keys are for --ingest (the pages have no authentication)")
    if backfill is not None and not ingest:
        raise click.ClickException("--backfill: it fills what --ingest receives; give --ingest too")
    given = click.get_current_context().get_parameter_source("backfill_delay")
    if backfill is None and given is click.core.ParameterSource.COMMANDLINE:
        raise click.ClickException("--backfill-delay: it is how long --backfill waits; give --backfill too")
    keys = ingest_keys(api_keys) if ingest else []
    if ingest and not keys and not is_loopback(host):
        raise click.ClickException(f"--ingest on {host} needs a key (--api-key or ${KEYS_ENV}): anyone who can "
                                   "reach the port could write into DB")
    if backfill is not None:
        from ..io.agent_server_sync import Client, SyncFailed

        try:
            Client(backfill)  # (before DB is made: a bad address changes nothing)
        except SyncFailed as e:
            raise click.ClickException(f"--backfill: {e}") from None
    judge(db, must_exist=not ingest)
    if ingest:
        _create(db)
    from ..web.app import create_app

    app = create_app(db, ingest=ingest, api_keys=keys, backfill=backfill, backfill_delay=backfill_delay)
    if backfill is not None:
        _log_backfill()
    sock = bound_socket(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    shown_host = f"[{bound_host}]" if ":" in bound_host else bound_host
    url = f"http://{shown_host}:{bound_port}/"
    if not is_loopback(host):
        click.echo(f"Warning: listening on {host}: anyone who can reach port {bound_port} reads every "
                   "conversation (the inspector has no authentication)", err=True)
    if fmt == "json":
        # One line, flushed: a script reads it to learn the port (--port 0).
        click.echo(json.dumps({"url": url, "database": shown(db), "backend": "postgresql" if is_url(db) else "sqlite",
                               "ingest": ingest, "backfill": backfill}))
    else:
        mode = "ingesting the agent server's webhooks" if ingest else "read-only"
        mode += f", backfilling from {backfill}" if backfill else ""
        click.echo(f"Serving {shown(db)} at {url} ({mode}; Ctrl-C stops it)")
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    if open_browser:
        import threading
        import webbrowser

        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    server.run(sockets=[sock])


def _log_backfill() -> None:
    """What the backfill did, a line on stderr each time (its failures are warnings anyway)."""
    import logging

    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    log = logging.getLogger("openhands_memory.ingest")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def _create(db: str) -> None:
    """DB at the current schema, made if it is missing (ingest fills a new one)."""
    from ..conversation import EventStore

    EventStore(db).close()
