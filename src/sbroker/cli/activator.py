"""``sbroker activator``: the external activator (docs/activation.md): subscribe, then start a
configured command as a process per reader a queue needs, until stopped."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import click

from sbroker.broker import Broker
from sbroker.cli.common import fail_cleanly, require_database
from sbroker.services.activation.external import (
    ANY_QUEUE,
    ActivatorStats,
    ExternalActivator,
    subscribe,
)

log = logging.getLogger("sbroker.activator")


@click.command()
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
@fail_cleanly
def activator(ctx: click.Context, notification_queue: str, commands: tuple[str, ...],
              max_per_queue: int, monitor_interval: float, no_monitors: bool) -> None:
    """The external activator: start COMMAND as a process per reader a queue needs."""
    import signal

    mapping: dict[str, str] = {}
    for spec in commands:
        queue, sep, command = spec.partition("=")
        if not sep or not queue or not command.strip():
            raise click.BadParameter(f"{spec!r}: expected QUEUE=COMMAND",
                                     param_hint="--command")
        mapping[queue] = command
    require_database(ctx)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stats = run_activator(ctx.obj["db"], notification_queue, mapping,
                          max_per_queue=max_per_queue, monitor_interval=monitor_interval,
                          start_monitors=not no_monitors, stop=stop)
    click.echo(f"activator stopped: {stats}")


COMMANDS = [activator]


def run_activator(database: str | os.PathLike[str], notification_queue: str,
                  commands: Mapping[str, str | Sequence[str]], *, max_per_queue: int = 1,
                  monitor_interval: float = 5.0, start_monitors: bool = True,
                  setup: bool = True, stop: threading.Event | None = None,
                  poll_seconds: float = 1.0, terminate_timeout: float = 10.0,
                  **open_options: Any) -> ActivatorStats:
    """``sbroker activator``: run until ``stop`` is set (the CLI sets it on SIGINT/SIGTERM).

    ``start_monitors`` runs this process's monitors of externally activated queues (turn off
    if another started broker, such as ``sbroker serve``, runs them); ``setup`` creates the
    notification queue, service and subscriptions for the named queues.  Children still
    running at the end get SIGTERM.
    """
    stop = stop or threading.Event()
    broker = Broker.open(database, monitor_interval=monitor_interval, **open_options)
    activator: ExternalActivator | None = None
    try:
        if setup:
            subscribe(broker, notification_queue, [q for q in commands if q != ANY_QUEUE])
        activator = ExternalActivator(broker, notification_queue, commands,
                                      max_per_queue=max_per_queue, database=str(database))
        if start_monitors:
            broker.activation.internal = False  # internal activation is its owner's business
            broker.start()
        log.info("activator running", extra={
            "database": str(database), "queue": notification_queue, "max": max_per_queue})
        activator.run(stop, poll_seconds=poll_seconds)
        return activator.stats
    finally:
        if activator is not None:
            activator.terminate(terminate_timeout)
        broker.close()
