"""The ``sbroker`` command line: init, send, receive, status, demo (more commands join as the
services that back them land).  Errors print one line and exit with a non-zero code."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table

from sbroker.broker import SQL_VIEWS, Broker
from sbroker.cli.dashboard import check_options, dashboard_options, make_server
from sbroker.cli.dashboard import dashboard as dashboard_command
from sbroker.core.errors import BrokerError

F = TypeVar("F", bound=Callable[..., Any])
DB_HELP = "Broker database: a file path or sqlite:///path (env SBROKER_DB)."


def _fail_cleanly(fn: F) -> F:
    """Turn a BrokerError into one line on stderr and exit code 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except BrokerError as exc:
            click.echo(f"sbroker: error {exc.number}: {exc}", err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


def _open(ctx: click.Context, **options: Any) -> Broker:
    path = ctx.obj["db"]
    return Broker.open(path, **options)


@click.group()
@click.option("--db", default="sbroker.db", envvar="SBROKER_DB", show_default=True, help=DB_HELP)
@click.pass_context
def main(ctx: click.Context, db: str) -> None:
    """sbroker: SQL Server Service Broker rebuilt for Python."""
    ctx.ensure_object(dict)
    ctx.obj["db"] = db


@main.command()
@click.option("--queue", "queues", multiple=True, help="Create this queue (repeatable).")
@click.option("--service", "services", multiple=True, metavar="NAME:QUEUE[:CONTRACT,...]",
              help="Create a service on a queue, accepting the contracts (repeatable).")
@click.pass_context
@_fail_cleanly
def init(ctx: click.Context, queues: tuple[str, ...], services: tuple[str, ...]) -> None:
    """Create the database (if needed), and optionally queues and services."""
    with _open(ctx) as b:
        existing = set(b.catalog.queues)
        for q in queues:
            if q not in existing:
                b.create_queue(q)
        for spec in services:
            parts = spec.split(":")
            if len(parts) not in (2, 3) or not all(parts[:2]):
                raise click.BadParameter(
                    f"{spec!r}: expected NAME:QUEUE or NAME:QUEUE:CONTRACT[,CONTRACT]",
                    param_hint="--service",
                )
            contracts = parts[2].split(",") if len(parts) == 3 and parts[2] else []
            if parts[0] not in b.catalog.services:
                b.create_service(parts[0], parts[1], contracts)
        click.echo(f"{ctx.obj['db']}: broker_instance {b.broker_instance}")


@main.command()
@click.option("--from", "from_service", help="Initiator service (begins a new dialog).")
@click.option("--to", "to_service", help="Target service name.")
@click.option("--contract", default="DEFAULT", show_default=True)
@click.option("--handle", help="Send on this existing conversation instead of a new dialog.")
@click.option("--type", "message_type", default="DEFAULT", show_default=True)
@click.option("--end", is_flag=True, help="End the conversation after sending.")
@click.argument("body", default="")
@click.pass_context
@_fail_cleanly
def send(ctx: click.Context, from_service: str | None, to_service: str | None, contract: str,
         handle: str | None, message_type: str, end: bool, body: str) -> None:
    """Send BODY (use - to read standard input); prints the conversation handle."""
    if body == "-":
        body = sys.stdin.read()
    if handle is None and not (from_service and to_service):
        raise click.UsageError("give --handle, or --from and --to to begin a new dialog")
    with _open(ctx) as b, b.transaction() as tx:
        if handle is None:
            assert from_service and to_service
            handle = tx.begin_dialog(from_service, to_service, contract)
        tx.send(handle, message_type, body)
        if end:
            tx.end_conversation(handle)
    click.echo(handle)


@main.command()
@click.argument("queue")
@click.option("--top", type=click.IntRange(min=1), help="At most this many messages.")
@click.option("--timeout", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Seconds to wait for a message.")
@click.option("--end", is_flag=True, help="End each conversation an EndDialog/Error arrives on.")
@click.pass_context
@_fail_cleanly
def receive(ctx: click.Context, queue: str, top: int | None, timeout: float, end: bool) -> None:
    """Receive from QUEUE and print each message as a JSON line."""
    with _open(ctx) as b, b.transaction() as tx:
        messages = tx.receive(queue, top=top, timeout=timeout)
        for msg in messages:
            click.echo(json.dumps({
                "conversation_handle": msg.conversation_handle,
                "conversation_group_id": msg.conversation_group_id,
                "message_sequence_number": msg.message_sequence_number,
                "message_type_name": msg.message_type_name,
                "service_name": msg.service_name,
                "priority": msg.priority,
                "body": msg.message_body.decode("utf-8", errors="replace"),
            }))
            if end and (msg.is_end_dialog or msg.is_error):
                tx.end_conversation(msg.conversation_handle)
    if not messages:
        click.echo(f"(no message in {queue})", err=True)


def print_views(broker: Broker, names: list[str], console: Console | None = None,
                columns: dict[str, list[str]] | None = None) -> None:
    """Print views as tables (long values shortened); ``columns`` picks columns per view."""
    console = console or Console()
    for name in names:
        rows = broker.view(name)
        if not rows:
            console.print(f"[bold]{name}[/bold]: (no rows)")
            continue
        cols = (columns or {}).get(name) or list(rows[0])
        if len(cols) > 7:  # too wide for a terminal: one record per row
            console.print(f"[bold]{name}[/bold] ({len(rows)} rows)")
            for i, row in enumerate(rows, 1):
                record = Table(show_header=False, box=None, padding=(0, 1))
                record.add_column(style="dim")
                record.add_column(overflow="fold")
                for col in cols:
                    record.add_row(col, _cell(row[col]))
                console.print(f"-- row {i}")
                console.print(record)
            continue
        table = Table(title=f"{name} ({len(rows)} rows)", title_justify="left")
        for col in cols:
            table.add_column(col, overflow="fold")
        for row in rows:
            table.add_row(*(_cell(row[c]) for c in cols))
        console.print(table)


def _cell(value: Any) -> str:
    if isinstance(value, bytes):
        text = value.decode("utf-8", errors="replace")
        return text if len(text) <= 60 else text[:57] + "..."
    return "" if value is None else str(value)


@main.command()
@click.argument("views", nargs=-1)
@click.pass_context
@_fail_cleanly
def status(ctx: click.Context, views: tuple[str, ...]) -> None:
    """Print the views (default: queues, services, endpoints, transmission queue)."""
    names = list(views) or ["service_queues", "services", "conversation_endpoints",
                            "transmission_queue", "dm_broker_queue_monitors"]
    with _open(ctx) as b:
        print_views(b, names)


@main.command()
@click.option("--durability", type=click.Choice(["normal", "full"]), default="normal",
              show_default=True, help="'full' fsyncs every commit.")
@click.option("--dashboard", "with_dashboard", is_flag=True,
              help="Serve the web dashboard in this process too (see `sbroker dashboard`).")
@dashboard_options("dashboard-")
@click.pass_context
@_fail_cleanly
def serve(ctx: click.Context, durability: str, with_dashboard: bool, host: str, port: int,
          token: str | None) -> None:
    """Run the started broker (endpoint, transmitter, timers, activation) until SIGINT/SIGTERM."""
    from sbroker.cli.serve import run_serve

    if with_dashboard:
        check_options(host, token)

    def ready(broker: Broker) -> None:
        address = broker.network.address
        where = f"listening on {address[0]}:{address[1]}" if address else "no endpoint"
        click.echo(f"sbroker: serving {ctx.obj['db']} ({where}); SIGINT or SIGTERM stops it")
        if with_dashboard:  # a broker service: stopped before the broker closes
            server = make_server(broker, host, port, token)
            broker.add_service(server)
            click.echo(f"sbroker: dashboard on {server.url}")

    sys.exit(run_serve(ctx.obj["db"], durability=durability, ready=ready))


@main.command()
@click.pass_context
@_fail_cleanly
def demo(ctx: click.Context) -> None:
    """A dialog between two services, step by step, with the views printed."""
    from sbroker.cli.demo import run_demo

    run_demo(ctx.obj["db"], Console())


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE",
              help="Override a [params] value of the file (repeatable).")
@click.option("--readers", type=click.IntRange(min=1), default=None,
              help="Executor readers (default: the pipeline's concurrency, at least 4).")
@click.option("--local", is_flag=True,
              help="Run on a thread pool in this process, without a broker database.")
@click.pass_context
@_fail_cleanly
def run(ctx: click.Context, file: str, params: tuple[str, ...], readers: int | None,
        local: bool) -> None:
    """Run a pipeline FILE (TOML) through the task scheduler, with a live display."""
    from sbroker.apps.pipeline.command import run_command

    opener = None if local else _broker_scheduler(ctx.obj["db"], readers)
    code, _ = run_command(file, list(params), open_scheduler=opener)
    sys.exit(code)


def _broker_scheduler(db: str, readers: int | None) -> Any:
    """Open the broker, install and start the executor, and hand out one scheduler."""
    import contextlib
    from pathlib import Path

    @contextlib.contextmanager
    def open_broker(pipeline: Any) -> Any:
        Path(db).parent.mkdir(parents=True, exist_ok=True)
        concurrency = pipeline.options.concurrency
        with Broker.open(db, monitor_interval=0.5) as broker:
            broker.install_executor(max_queue_readers=readers or max(concurrency or 4, 4),
                                    spark=pipeline.options.spark)
            broker.start()
            try:
                with broker.scheduler(pipeline.name, max_concurrency=concurrency) as scheduler:
                    yield scheduler
            finally:
                state = getattr(broker, "_executor_state", None)
                broker.stop()
                if state is not None:
                    state.runner.close()

    return open_broker


@main.command()
@click.option("--notification-queue", required=True,
              help="Queue receiving the QUEUE_ACTIVATION event notifications.")
@click.option("--command", "commands", multiple=True, required=True, metavar="QUEUE=COMMAND",
              help="Start COMMAND for QUEUE (repeatable; QUEUE '*' is the default).")
@click.option("--max-per-queue", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--monitor-interval", type=click.FloatRange(min=0.01), default=5.0,
              show_default=True)
@click.option("--no-monitors", is_flag=True,
              help="Another started broker (sbroker serve) runs the queue monitors.")
@click.pass_context
@_fail_cleanly
def activator(ctx: click.Context, notification_queue: str, commands: tuple[str, ...],
              max_per_queue: int, monitor_interval: float, no_monitors: bool) -> None:
    """The external activator: start COMMAND as a process per reader a queue needs."""
    import signal
    import threading

    from sbroker.services.activation.external import run_activator

    mapping: dict[str, str] = {}
    for spec in commands:
        queue, sep, command = spec.partition("=")
        if not sep or not queue or not command.strip():
            raise click.BadParameter(f"{spec!r}: expected QUEUE=COMMAND",
                                     param_hint="--command")
        mapping[queue] = command
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stats = run_activator(ctx.obj["db"], notification_queue, mapping,
                          max_per_queue=max_per_queue, monitor_interval=monitor_interval,
                          start_monitors=not no_monitors, stop=stop)
    click.echo(f"activator stopped: {stats}")


@main.group()
def poison() -> None:
    """Poison messages taken out by sbroker.poison: list them, re-drive them."""


@poison.command("list")
@click.option("--queue", help="Only this queue.")
@click.option("--state", type=click.Choice(
    ["dropped", "ended", "logged", "notified", "parked", "redriven"]))
@click.pass_context
@_fail_cleanly
def poison_list(ctx: click.Context, queue: str | None, state: str | None) -> None:
    """Removed messages and what was done with them (JSON lines)."""
    from sbroker.apps import poison as p

    with _open(ctx) as b:
        for row in p.list_messages(b, queue=queue, state=state):
            click.echo(json.dumps(row, default=_json_default))


@poison.command("incidents")
@click.option("--queue", help="Only this queue.")
@click.pass_context
@_fail_cleanly
def poison_incidents(ctx: click.Context, queue: str | None) -> None:
    """Failed attempts recorded and not yet resolved (JSON lines)."""
    from sbroker.apps import poison as p

    with _open(ctx) as b:
        for row in p.list_incidents(b, queue=queue):
            click.echo(json.dumps(row, default=_json_default))


@poison.command("redrive")
@click.argument("record_ids", nargs=-1, type=int)
@click.option("--due", is_flag=True, help="Re-drive every parked message whose delay passed.")
@click.pass_context
@_fail_cleanly
def poison_redrive(ctx: click.Context, record_ids: tuple[int, ...], due: bool) -> None:
    """Send removed messages again into their conversations."""
    from sbroker.apps import poison as p

    if not record_ids and not due:
        raise click.UsageError("give RECORD_ID(s) from `sbroker poison list`, or --due")
    with _open(ctx) as b:
        for record_id in record_ids:
            click.echo(f"{record_id}: re-sent on conversation {p.redrive(b, record_id)}")
        if due:
            click.echo(f"{p.redrive_due(b)} parked message(s) re-sent")


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return str(value)


@main.command("views")
def list_views() -> None:
    """List the view names ``status`` accepts."""
    for name in (*SQL_VIEWS, "dm_broker_queue_monitors", "dm_broker_activated_tasks",
                 "dm_broker_connections"):
        click.echo(name)


main.add_command(dashboard_command)  # sbroker dashboard (cli/dashboard.py)

if __name__ == "__main__":  # pragma: no cover
    main()
