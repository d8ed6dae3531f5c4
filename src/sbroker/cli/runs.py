"""``sbroker runs``: the durable runs of pipelines, newest first, and one run's tasks."""

from __future__ import annotations

import json
import sys

import click
from rich.console import Console

from sbroker.cli.common import fail_cleanly, open_broker
from sbroker.cli.tables import print_rows


@click.group(invoke_without_command=True)
@click.option("--pipeline", metavar="NAME", help="Only the runs of this pipeline.")
@click.option("--json", "as_json", is_flag=True, help="A JSON list instead of a table.")
@click.pass_context
@fail_cleanly
def runs(ctx: click.Context, pipeline: str | None, as_json: bool) -> None:
    """Runs of pipelines, newest first (`sbroker runs show RUN_ID` for one run's tasks)."""
    if ctx.invoked_subcommand is not None:
        return
    from sbroker.apps.pipeline.runs import list_runs

    with open_broker(ctx) as b:
        rows = list_runs(b, pipeline)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        print_rows(Console(), "runs", rows)


@runs.command("show")
@click.argument("run_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of tables.")
@click.pass_context
@fail_cleanly
def runs_show(ctx: click.Context, run_id: int, as_json: bool) -> None:
    """Each task of run RUN_ID: status, attempts, times, value and error."""
    from sbroker.apps.pipeline.runs import get_run

    with open_broker(ctx) as b:
        run = get_run(b, run_id)
    if run is None:
        click.echo(f"sbroker: error: there is no run {run_id}", err=True)
        sys.exit(1)
    if as_json:
        click.echo(json.dumps(run, indent=2))
        return
    tasks = run.pop("tasks")
    console = Console()
    print_rows(console, f"run {run_id}", [run])
    print_rows(console, "tasks", [{**t, "value": json.dumps(t["value"])} for t in tasks])


COMMANDS = [runs]
