"""``sbroker queue``: list, create, enable, disable and drop queues."""

from __future__ import annotations

import click
from rich.console import Console

from sbroker.cli.common import fail_cleanly, open_broker
from sbroker.cli.tables import print_rows


@click.group()
def queue() -> None:
    """Queues: list them with their message counts, create, enable, disable, drop."""


@queue.command("list")
@click.pass_context
@fail_cleanly
def queue_list(ctx: click.Context) -> None:
    """Each queue: messages ready and locked, whether it is enabled, its activation."""
    with open_broker(ctx) as b:
        counts = {r["queue"]: r for r in b.queue_metrics()}
        rows = [{"queue": q["name"], "ready": counts[q["name"]]["ready"],
                 "locked": counts[q["name"]]["locked"],
                 "enabled": bool(q["is_receive_enabled"]),
                 "activation": q["activation_procedure"] if q["is_activation_enabled"] else "",
                 "max_readers": q["max_queue_readers"]} for q in b.view("service_queues")]
    print_rows(Console(), "queues", rows)


@queue.command("create")
@click.argument("name")
@click.option("--disabled", is_flag=True, help="Create it disabled (status off).")
@click.option("--no-poison-handling", is_flag=True,
              help="Never disable it after five rolled-back receives.")
@click.pass_context
@fail_cleanly
def queue_create(ctx: click.Context, name: str, disabled: bool,
                 no_poison_handling: bool) -> None:
    """Create queue NAME (no error if it exists with the same options)."""
    with open_broker(ctx) as b:
        b.create_queue(name, status=not disabled,
                       poison_message_handling=not no_poison_handling, exist_ok=True)
    click.echo(f"queue {name} created")


@queue.command("enable")
@click.argument("name")
@click.pass_context
@fail_cleanly
def queue_enable(ctx: click.Context, name: str) -> None:
    """Enable queue NAME again (after poison-message handling disabled it)."""
    with open_broker(ctx) as b:
        b.alter_queue(name, status=True)
        ready = next(r["ready"] for r in b.queue_metrics() if r["queue"] == name)
    click.echo(f"queue {name} enabled: {ready} message(s) ready to receive")


@queue.command("disable")
@click.argument("name")
@click.pass_context
@fail_cleanly
def queue_disable(ctx: click.Context, name: str) -> None:
    """Disable queue NAME: RECEIVE fails and arriving messages wait in the transmission
    queue until it is enabled again."""
    with open_broker(ctx) as b:
        b.alter_queue(name, status=False)
    click.echo(f"queue {name} disabled")


@queue.command("drop")
@click.argument("name")
@click.pass_context
@fail_cleanly
def queue_drop(ctx: click.Context, name: str) -> None:
    """Drop queue NAME (its services must be dropped first)."""
    with open_broker(ctx) as b:
        b.drop_queue(name)
    click.echo(f"queue {name} dropped")


COMMANDS = [queue]
