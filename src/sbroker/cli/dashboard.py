"""``sbroker dashboard``: the operations dashboard of a broker database (docs/dashboard.md), in
a process of its own beside the workers; and the ``--dashboard`` options of ``sbroker serve``.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from sbroker.cli.common import Broker, open_broker
from sbroker.core.errors import BrokerError

if TYPE_CHECKING:  # the web stack is an optional extra: imported when a server is made
    from sbroker.apps.dashboard import DashboardServer

F = TypeVar("F", bound=Callable[..., Any])
TOKEN_HELP = "Needed for actions, and for reading off loopback (env SBROKER_DASHBOARD_TOKEN)."
MISSING = ("the dashboard needs its web stack: pip install 'sbroker[dashboard]' "
           "(or make setup)")


def _server_class() -> type[DashboardServer]:
    try:
        from sbroker.apps.dashboard import DashboardServer
    except ImportError as exc:
        raise click.ClickException(f"{MISSING} ({exc})") from None
    return DashboardServer


def make_server(broker: Broker, host: str, port: int, token: str | None,
                spark_ui: str | None = None, trace_url: str | None = None) -> DashboardServer:
    """A DashboardServer, or one clear line (and exit code 1) for a bad host, port or token."""
    server_class = _server_class()
    from sbroker.apps.dashboard import DashboardError

    try:
        return server_class(broker, host=host, port=port, token=token, spark_ui=spark_ui,
                            trace_url=trace_url)
    except (DashboardError, OSError) as exc:
        raise click.ClickException(str(exc)) from None


def check_options(host: str, token: str | None) -> None:
    """Refuse a non-loopback bind without a token before anything is opened."""
    _server_class()
    from sbroker.apps.dashboard import DashboardError, check_bind

    try:
        check_bind(host, token)
    except DashboardError as exc:
        raise click.ClickException(str(exc)) from None


def check_trace_url(template: str | None) -> None:
    """--trace-url: an http(s) address with ``{trace_id}`` in it, or one clear line."""
    if template is not None and (not template.startswith(("http://", "https://"))
                                 or "{trace_id}" not in template):
        raise click.ClickException(
            f"--trace-url must be an http(s) URL with {{trace_id}} in it, got {template!r}")


def dashboard_options(prefix: str) -> Callable[[F], F]:
    """--host/--port/--token (``prefix`` "dashboard-" for ``serve``)."""

    def decorate(fn: F) -> F:
        fn = click.option(f"--{prefix}token", "token", envvar="SBROKER_DASHBOARD_TOKEN",
                          default=None, help=TOKEN_HELP)(fn)
        fn = click.option(f"--{prefix}port", "port", type=click.IntRange(0, 65535),
                          default=8470, show_default=True, help="Dashboard port.")(fn)
        return click.option(f"--{prefix}host", "host", default="127.0.0.1",
                            show_default=True, help="Dashboard address.")(fn)

    return decorate


@click.command()
@dashboard_options("")
@click.option("--spark-ui", default=None, metavar="URL",
              help="Link to this Spark UI (default: the executor's, when its UI is on).")
@click.option("--trace-url", default=None, metavar="TEMPLATE",
              help="Link trace ids to this trace viewer: an http(s) URL with {trace_id} in it.")
@click.pass_context
def dashboard(ctx: click.Context, host: str, port: int, token: str | None,
              spark_ui: str | None, trace_url: str | None) -> None:
    """Serve the web dashboard, /metrics and the JSON API of the database (Ctrl-C stops)."""
    check_options(host, token)
    check_trace_url(trace_url)
    try:
        broker = open_broker(ctx)  # a typo in --db never serves a new empty file
    except BrokerError as exc:
        click.echo(f"sbroker: error {exc.number}: {exc}", err=True)
        sys.exit(1)
    try:
        server = make_server(broker, host, port, token, spark_ui, trace_url)
        click.echo(f"sbroker: dashboard of {ctx.obj['db']} on {server.url}"
                   f"{' (token required)' if token else ''}; Ctrl-C stops it")
        # uvicorn stops on SIGINT/SIGTERM, then raises the signal again: end quietly, code 0
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        with contextlib.suppress(KeyboardInterrupt):
            server.run()
    finally:
        broker.close()


COMMANDS = [dashboard]
