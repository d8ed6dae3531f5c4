"""``sbroker runs``: the durable runs of pipelines, newest first; one run's tasks; waiting
for a run's end; cancelling a run (docs/pipelines.md)."""

from __future__ import annotations

import json
import sys
from typing import NoReturn

import click
from rich.console import Console

from sbroker.cli.common import fail_cleanly, open_broker
from sbroker.cli.tables import print_rows

EXIT_TIMEOUT = 124  # as timeout(1): `runs wait --timeout` ran out


def _usage(message: str) -> NoReturn:
    click.echo(f"sbroker: error: {message}", err=True)
    sys.exit(2)


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
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of a table.")
@click.pass_context
@fail_cleanly
def runs_show(ctx: click.Context, run_id: int, as_json: bool) -> None:
    """Each task of run RUN_ID (status, attempts, time, value, error) and its driver."""
    from sbroker.apps.pipeline.rundisplay import stored_run_table
    from sbroker.apps.pipeline.runs import get_run

    with open_broker(ctx) as b:
        run = get_run(b, run_id)
    if run is None:
        click.echo(f"sbroker: error: there is no run {run_id}", err=True)
        sys.exit(1)
    if as_json:
        click.echo(json.dumps(run, indent=2))
        return
    Console().print(stored_run_table(run))


@runs.command("wait")
@click.argument("run_id", type=int)
@click.option("--timeout", metavar="DURATION",
              help="Give up after this long (\"90s\", \"10m\", or seconds): exit 124.")
@click.pass_context
@fail_cleanly
def runs_wait(ctx: click.Context, run_id: int, timeout: str | None) -> None:
    """Wait for run RUN_ID to end; exit as `sbroker run` would (0 succeeded, 1 failed or
    cancelled, 2 no such run, 124 on timeout)."""
    from sbroker.apps.pipeline.control import run_exit_code, wait_run
    from sbroker.apps.pipeline.parser import PipelineError
    from sbroker.apps.pipeline.rules import parse_duration

    seconds = None if timeout is None else parse_duration(timeout)
    if timeout is not None and seconds is None:
        _usage(f"--timeout must be a duration such as \"90s\", \"10m\" or a number of"
               f" seconds, not {timeout!r}")
    with open_broker(ctx) as b:
        try:
            status = wait_run(b, run_id, seconds)
        except PipelineError as exc:
            _usage(str(exc))
    if status is None:
        click.echo(f"sbroker: run {run_id} still running after {timeout}", err=True)
        sys.exit(EXIT_TIMEOUT)
    click.echo(f"run {run_id} {status}")
    sys.exit(run_exit_code(status))


@runs.command("cancel")
@click.argument("run_id", type=int)
@click.pass_context
@fail_cleanly
def runs_cancel(ctx: click.Context, run_id: int) -> None:
    """Cancel run RUN_ID (from any process): its running attempts stop, the tasks not started
    stay pending, and it ends `cancelled` (resumable with `sbroker run FILE --resume`)."""
    from sbroker.apps.pipeline.control import cancel_run
    from sbroker.apps.pipeline.parser import PipelineError

    with open_broker(ctx) as b:
        try:
            click.echo(cancel_run(b, run_id))
        except PipelineError as exc:
            _usage(str(exc))


COMMANDS = [runs]
