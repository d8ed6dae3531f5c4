"""``sql``: run T-SQL scripts against the broker database, like sqlcmd (docs/tsql.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich import box
from rich.console import Console
from rich.table import Table

from sbroker import Broker
from sbroker.apps.tsql import ResultSet, Runner
from sbroker.cli.common import fail_cleanly, json_default, open_broker
from sbroker.cli.tables import cell
from sbroker.core.errors import InvalidArgumentError


def _variables(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not name:
            raise InvalidArgumentError(f"-v {pair!r}: use -v NAME=VALUE")
        out[name] = value
    return out


def _print(result: ResultSet, as_json: bool, console: Console) -> None:
    if as_json:
        click.echo(json.dumps({"columns": result.columns, "rows": result.rows},
                              default=json_default))
        return
    table = Table(box=box.SIMPLE_HEAD)
    for column in result.columns:
        table.add_column(column or "(No column name)", overflow="fold")
    for row in result.rows:
        table.add_row(*("NULL" if v is None else cell(v) for v in row))
    console.print(table)
    console.print(f"({len(result.rows)} row{'s' if len(result.rows) != 1 else ''} affected)")


def _others_activate(broker: Broker) -> bool:
    """Whether another live process (a ``sbroker serve``) runs activation on the database:
    its queue monitors are in ``dm_broker_queue_monitors``."""
    return any(row["session_id"] != broker.session_id
               for row in broker.view("dm_broker_queue_monitors"))


def _should_start(broker: Broker, start: bool | None, script: bool) -> bool:
    """Start the broker's services for the run? ``--start`` / ``--no-start`` decide; by
    default a script (FILE or standard input) does, unless another process already runs
    activation on the database, and ``-Q`` alone does not (docs/tsql.md, "Activation while
    scripts run")."""
    if start is not None:
        return start
    return script and not _others_activate(broker)


@click.command("sql")
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False,
                                                    path_type=Path))
@click.option("-Q", "query", help="T-SQL text to run (after the FILES).")
@click.option("-v", "variables", multiple=True, metavar="NAME=VALUE",
              help="A scripting variable: $(NAME) in the scripts is replaced by VALUE.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object per result set: {\"columns\": [...], \"rows\": [[...]]}.")
@click.option("-b", "stop", is_flag=True, help="Stop at the first batch that fails.")
@click.option("--start/--no-start", default=None,
              help="Start the broker's services (activation, conversation timers, the"
                   " endpoint) while the scripts run. Default: for FILES or standard input,"
                   " unless a `sbroker serve` already runs activation on the database; not"
                   " for -Q alone.")
@click.pass_context
@fail_cleanly
def sql(ctx: click.Context, files: tuple[Path, ...], query: str | None,
        variables: tuple[str, ...], as_json: bool, stop: bool, start: bool | None) -> None:
    """Run T-SQL batches (separated by GO) from FILES and -Q against the broker database.

    Result sets go to standard output, PRINT and RAISERROR of severity 10 or less to standard
    error. Exit code 1 when a batch failed with an error of severity 11 or more (the script
    goes on with the next batch unless -b). While a script runs, the broker is started, so
    that activation runs the queues' procedures, unless a `sbroker serve` on the database
    does that already; -Q alone starts nothing (--start / --no-start decide otherwise)."""
    texts = [path.read_text("utf-8-sig") for path in files]
    if query is not None:
        texts.append(query)
    script = bool(files) or query is None
    if not texts:
        texts.append(sys.stdin.read())
    console = Console()
    failed = False
    with open_broker(ctx, create=True) as broker:
        if _should_start(broker, start, script):
            broker.start()
        runner = Runner(broker, out=lambda text: click.echo(text, err=True),
                        variables=_variables(variables))
        try:
            for text in texts:
                for outcome in runner.batches(text):
                    for result in outcome.results:
                        _print(result, as_json, console)
                    if outcome.error is not None:
                        click.echo(str(outcome.error), err=True)
                        failed = True
                        if stop:
                            break
                if failed and stop:
                    break
        finally:
            runner.close()
    if failed:
        sys.exit(1)


COMMANDS = (sql,)
