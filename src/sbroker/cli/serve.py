"""``sbroker serve``: run a started broker (endpoint listener, transmitter, timers,
activation) as a process until SIGINT or SIGTERM, then stop cleanly."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import click

from sbroker.cli.common import Broker, fail_cleanly, require_database
from sbroker.cli.dashboard import check_options, dashboard_options, make_server


def run_serve(
    database: str | os.PathLike[str],
    *,
    ready: Callable[[Broker], None] | None = None,
    stop_event: threading.Event | None = None,
    **options: Any,
) -> int:
    """Open ``database`` (``Broker.open`` options), start it, serve until SIGINT/SIGTERM
    (or ``stop_event``), stop and close it. ``ready(broker)`` runs once it is started.
    Returns the process exit code (0)."""
    stop = stop_event or threading.Event()
    previous: dict[signal.Signals, Any] = {}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, on_signal)
    broker = Broker.open(database, **options)
    try:
        broker.start()
        if ready is not None:
            ready(broker)
        while not stop.wait(0.5):
            pass
    finally:
        broker.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


@click.command()
@click.option("--durability", type=click.Choice(["normal", "full"]), default="normal",
              show_default=True, help="'full' fsyncs every commit.")
@click.option("--dashboard", "with_dashboard", is_flag=True,
              help="Serve the web dashboard in this process too (see `sbroker dashboard`).")
@dashboard_options("dashboard-")
@click.pass_context
@fail_cleanly
def serve(ctx: click.Context, durability: str, with_dashboard: bool, host: str, port: int,
          token: str | None) -> None:
    """Run the started broker (endpoint, transmitter, timers, activation) until SIGINT/SIGTERM."""
    if with_dashboard:  # a bad bind is refused before anything is opened
        check_options(host, token)
    require_database(ctx)

    def ready(broker: Broker) -> None:
        from sbroker.apps.pipeline.service import PipelineService

        # schedules' due runs, submitted runs, and runs whose driver is gone: driven here
        broker.add_service(PipelineService(broker))
        address = broker.network.address
        where = f"listening on {address[0]}:{address[1]}" if address else "no endpoint"
        click.echo(f"sbroker: serving {ctx.obj['db']} ({where}); SIGINT or SIGTERM stops it")
        if with_dashboard:  # a broker service: stopped before the broker closes
            server = make_server(broker, host, port, token)
            broker.add_service(server)
            click.echo(f"sbroker: dashboard on {server.url}")

    sys.exit(run_serve(ctx.obj["db"], durability=durability, ready=ready))


COMMANDS = [serve]
