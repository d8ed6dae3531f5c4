"""``sbroker endpoint`` and ``sbroker route``: how this database talks to other brokers."""

from __future__ import annotations

import dataclasses

import click
from rich.console import Console

from sbroker.cli.common import fail_cleanly, open_broker
from sbroker.cli.tables import print_rows


@click.group()
def endpoint() -> None:
    """The broker endpoint: where this database listens for other brokers, and how they
    authenticate (a shared secret, or certificates)."""


@endpoint.command("create")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (0.0.0.0 for every interface).")
@click.option("--port", type=click.IntRange(0, 65535), default=4022, show_default=True)
@click.option("--secret", envvar="SBROKER_ENDPOINT_SECRET",
              help="Shared secret of the brokers that talk to each other"
                   " (env SBROKER_ENDPOINT_SECRET, so that it stays out of `ps`).")
@click.option("--certificate", type=click.Path(exists=True, dir_okay=False),
              help="PEM certificate of this endpoint (with --private-key and --ca).")
@click.option("--private-key", type=click.Path(exists=True, dir_okay=False))
@click.option("--ca", type=click.Path(exists=True, dir_okay=False),
              help="PEM certificate(s) of the authority that signs the peers' certificates.")
@click.option("--encryption", type=click.Choice(["required", "supported", "disabled"]),
              default="required", show_default=True)
@click.pass_context
@fail_cleanly
def endpoint_create(ctx: click.Context, host: str, port: int, secret: str | None,
                    certificate: str | None, private_key: str | None, ca: str | None,
                    encryption: str) -> None:
    """Create the endpoint (`sbroker serve` then listens on it)."""
    with open_broker(ctx) as b:
        b.create_endpoint(host, port, secret=secret, certificate=certificate,
                          private_key=private_key, ca=ca, encryption=encryption,
                          exist_ok=True)
        instance = b.broker_instance
    click.echo(f"endpoint tcp://{host}:{port} created; this broker_instance is {instance}")


@endpoint.command("list")
@click.pass_context
@fail_cleanly
def endpoint_list(ctx: click.Context) -> None:
    """The endpoint's options (the secret is not shown)."""
    with open_broker(ctx) as b:
        cfg = b.network.endpoint()
        instance = b.broker_instance
    if cfg is None:
        click.echo("(no endpoint: sbroker endpoint create --port PORT --secret ...)", err=True)
        return
    row = dataclasses.asdict(cfg)
    row["secret"] = "(set)" if cfg.secret else ""
    row.update(row.pop("tunables"))
    print_rows(Console(), f"endpoint of broker_instance {instance}", [row],
               [k for k, v in row.items() if v not in (None, "", {})])


@endpoint.command("drop")
@click.pass_context
@fail_cleanly
def endpoint_drop(ctx: click.Context) -> None:
    """Drop the endpoint."""
    with open_broker(ctx) as b:
        b.drop_endpoint()
    click.echo("endpoint dropped")


@click.group()
def route() -> None:
    """Routes: where messages for a service of another broker go."""


@route.command("create")
@click.argument("name")
@click.option("--service", help="The remote service name (default: any service).")
@click.option("--address", required=True, help="tcp://host:port of the other broker's"
              " endpoint, LOCAL or TRANSPORT.")
@click.option("--broker-instance", help="The other database's broker_instance (printed by"
              " its `sbroker init` and `sbroker endpoint create`).")
@click.option("--lifetime", type=click.FloatRange(min=0, min_open=True),
              help="Seconds until the route expires.")
@click.pass_context
@fail_cleanly
def route_create(ctx: click.Context, name: str, service: str | None, address: str,
                 broker_instance: str | None, lifetime: float | None) -> None:
    """Create route NAME (no error if it exists with the same definition)."""
    with open_broker(ctx) as b:
        b.create_route(name, service, address, broker_instance, lifetime, exist_ok=True)
    click.echo(f"route {name} created: {service or 'any service'} -> {address}")


@route.command("list")
@click.pass_context
@fail_cleanly
def route_list(ctx: click.Context) -> None:
    """Every route (AutoCreatedLocal is in every database)."""
    with open_broker(ctx) as b:
        print_rows(Console(), "routes", b.view("routes"))


@route.command("drop")
@click.argument("name")
@click.pass_context
@fail_cleanly
def route_drop(ctx: click.Context, name: str) -> None:
    """Drop route NAME."""
    with open_broker(ctx) as b:
        b.drop_route(name)
    click.echo(f"route {name} dropped")


COMMANDS = [endpoint, route]
