"""``sql``: run T-SQL scripts against the broker database, like sqlcmd (docs/tsql.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich import box
from rich.console import Console
from rich.table import Table

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


@click.command("sql")
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False,
                                                    path_type=Path))
@click.option("-Q", "query", help="T-SQL text to run (after the FILES).")
@click.option("-v", "variables", multiple=True, metavar="NAME=VALUE",
              help="A scripting variable: $(NAME) in the scripts is replaced by VALUE.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object per result set: {\"columns\": [...], \"rows\": [[...]]}.")
@click.option("-b", "stop", is_flag=True, help="Stop at the first batch that fails.")
@click.pass_context
@fail_cleanly
def sql(ctx: click.Context, files: tuple[Path, ...], query: str | None,
        variables: tuple[str, ...], as_json: bool, stop: bool) -> None:
    """Run T-SQL batches (separated by GO) from FILES and -Q against the broker database.

    Result sets go to standard output, PRINT and RAISERROR of severity 10 or less to standard
    error. Exit code 1 when a batch failed with an error of severity 11 or more (the script
    goes on with the next batch unless -b). The broker is started while the scripts run, so
    that activation runs the queues' procedures."""
    texts = [path.read_text("utf-8-sig") for path in files]
    if query is not None:
        texts.append(query)
    if not texts:
        texts.append(sys.stdin.read())
    console = Console()
    failed = False
    with open_broker(ctx, create=True, start=True) as broker:
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
