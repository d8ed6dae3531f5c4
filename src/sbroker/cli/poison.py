"""``sbroker poison``: messages taken out by ``sbroker.poison``, listed and re-driven."""

from __future__ import annotations

import click

from sbroker.cli.common import fail_cleanly, open_broker
from sbroker.cli.tables import json_line


@click.group()
def poison() -> None:
    """Poison messages taken out by sbroker.poison: list them, re-drive them."""


@poison.command("list")
@click.option("--queue", help="Only this queue.")
@click.option("--state", type=click.Choice(
    ["dropped", "ended", "logged", "notified", "parked", "redriven"]))
@click.pass_context
@fail_cleanly
def poison_list(ctx: click.Context, queue: str | None, state: str | None) -> None:
    """Removed messages and what was done with them (JSON lines)."""
    from sbroker.apps import poison as p

    with open_broker(ctx) as b:
        for row in p.list_messages(b, queue=queue, state=state):
            click.echo(json_line(row))


@poison.command("incidents")
@click.option("--queue", help="Only this queue.")
@click.pass_context
@fail_cleanly
def poison_incidents(ctx: click.Context, queue: str | None) -> None:
    """Failed attempts recorded and not yet resolved (JSON lines)."""
    from sbroker.apps import poison as p

    with open_broker(ctx) as b:
        for row in p.list_incidents(b, queue=queue):
            click.echo(json_line(row))


@poison.command("redrive")
@click.argument("record_ids", nargs=-1, type=int)
@click.option("--due", is_flag=True, help="Re-drive every parked message whose delay passed.")
@click.pass_context
@fail_cleanly
def poison_redrive(ctx: click.Context, record_ids: tuple[int, ...], due: bool) -> None:
    """Send removed messages again into their conversations."""
    from sbroker.apps import poison as p

    if not record_ids and not due:
        raise click.UsageError("give RECORD_ID(s) from `sbroker poison list`, or --due")
    with open_broker(ctx) as b:
        for record_id in record_ids:
            click.echo(f"{record_id}: re-sent on conversation {p.redrive(b, record_id)}")
        if due:
            click.echo(f"{p.redrive_due(b)} parked message(s) re-sent")


COMMANDS = [poison]
