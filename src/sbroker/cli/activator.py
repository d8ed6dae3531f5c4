"""``sbroker activator``: the external activator (SPEC §5)."""

from __future__ import annotations

import click

from sbroker.cli.common import fail_cleanly, require_database


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
    import threading

    from sbroker.services.activation.external import run_activator

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
