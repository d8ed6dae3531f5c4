"""``status`` and ``views``: what is in the database, as tables."""

from __future__ import annotations

import click

from sbroker.cli.common import SQL_VIEWS, fail_cleanly, open_broker
from sbroker.cli.tables import print_views


@click.command()
@click.argument("views", nargs=-1)
@click.pass_context
@fail_cleanly
def status(ctx: click.Context, views: tuple[str, ...]) -> None:
    """Print the views (default: queues, services, endpoints, transmission queue)."""
    names = list(views) or ["service_queues", "services", "conversation_endpoints",
                            "transmission_queue", "dm_broker_queue_monitors"]
    with open_broker(ctx) as b:
        print_views(b, names)


@click.command("views")
def list_views() -> None:
    """List the view names ``status`` accepts."""
    for name in (*SQL_VIEWS, "dm_broker_queue_monitors", "dm_broker_activated_tasks",
                 "dm_broker_connections"):
        click.echo(name)


COMMANDS = [status, list_views]
