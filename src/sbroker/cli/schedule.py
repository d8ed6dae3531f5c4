"""``sbroker schedule add | list | remove | backfill``: pipeline files started on a schedule
by `sbroker serve`, and a schedule's past ticks run again (docs/pipelines.md)."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click
from rich.console import Console

from sbroker.cli.common import fail_cleanly, open_broker
from sbroker.cli.run import running_executor, sigterm_as_ctrl_c
from sbroker.cli.tables import print_rows

if TYPE_CHECKING:
    from sbroker.apps.pipeline.backfill import Backfill, TickResult

EXIT_INTERRUPTED = 130


@click.group()
def schedule() -> None:
    """Schedules of pipeline files: `sbroker serve` starts their due runs."""


@schedule.command("add")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE",
              help="Override a [params] value of the file (repeatable).")
@click.option("--every", metavar="DURATION", help='Every DURATION ("15m", "1h", ...).')
@click.option("--cron", metavar="EXPR", help='On a five-field cron expression ("0 2 * * *").')
@click.pass_context
@fail_cleanly
def schedule_add(ctx: click.Context, file: str, params: tuple[str, ...], every: str | None,
                 cron: str | None) -> None:
    """Schedule pipeline FILE (TOML, or a Python pipeline FILE.py:ATTR or module:attr) by
    its schedule, or by --every / --cron (it replaces a schedule of the same pipeline
    name)."""
    from sbroker.apps.pipeline.loading import is_python_target, load_python_pipeline
    from sbroker.apps.pipeline.parser import (
        PipelineError,
        load_pipeline,
        parse_param_overrides,
    )
    from sbroker.apps.pipeline.rules import check_cron, parse_duration
    from sbroker.apps.pipeline.schedules import add_schedule

    if every and cron:
        raise click.UsageError("give --every or --cron, not both")
    try:
        seconds = None if every is None else parse_duration(every)
        if every is not None and not seconds:
            raise PipelineError(f"--every must be a duration such as \"15m\", got {every!r}")
        if cron is not None:
            check_cron(cron, lambda msg, key: PipelineError(msg.replace("'cron'", "--cron")))
        overrides = parse_param_overrides(list(params))
        pipeline = (load_python_pipeline(file, overrides) if is_python_target(file)
                    else load_pipeline(file, overrides))
        with open_broker(ctx, create=True) as b:
            row = add_schedule(b, pipeline, overrides=overrides, every=seconds, cron=cron)
    except PipelineError as exc:
        click.echo(f"sbroker: error: {exc}", err=True)
        sys.exit(2)
    click.echo(f"schedule {row['name']} added: next run due {row['next_due']}")


@schedule.command("list")
@click.option("--json", "as_json", is_flag=True, help="A JSON list instead of a table.")
@click.pass_context
@fail_cleanly
def schedule_list(ctx: click.Context, as_json: bool) -> None:
    """Each schedule with its next due time."""
    from sbroker.apps.pipeline.schedules import list_schedules

    with open_broker(ctx) as b:
        rows = list_schedules(b)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
    else:
        print_rows(Console(), "schedules", [{**r, "params": json.dumps(r["params"])}
                                            for r in rows])


@schedule.command("remove")
@click.argument("name")
@click.pass_context
@fail_cleanly
def schedule_remove(ctx: click.Context, name: str) -> None:
    """Remove the schedule NAME (a run it started goes on)."""
    from sbroker.apps.pipeline.schedules import remove_schedule

    with open_broker(ctx) as b:
        removed = remove_schedule(b, name)
    if not removed:
        click.echo(f"sbroker: error: there is no schedule {name!r}", err=True)
        sys.exit(1)
    click.echo(f"schedule {name} removed")


def _usage(message: str) -> NoReturn:
    click.echo(f"sbroker: error: {message}", err=True)
    sys.exit(2)


@schedule.command("backfill")
@click.argument("name")
@click.option("--from", "start", metavar="T1", help="First time of the range (included): an"
              " ISO date or time in the schedule's timezone.")
@click.option("--to", "end", metavar="T2", help="End of the range (excluded).")
@click.option("--reprocess", default="none", metavar="none|failed|all", show_default=True,
              help="A tick that has a run: none leaves it, failed runs it again when it failed"
                   " or was cancelled, all runs it again whatever it ended.")
@click.option("--parallel", default="1", metavar="N", show_default=True,
              help="Runs at most N ticks at once (the schedule's max_active_runs bounds them"
                   " too).")
@click.option("--submit", is_flag=True,
              help="Record the runs and return at once, printing their ids: `sbroker serve`"
                   " processes drive them.")
@click.pass_context
@fail_cleanly
def schedule_backfill(ctx: click.Context, name: str, start: str | None, end: str | None,
                      reprocess: str, parallel: str, submit: bool) -> None:
    """Run schedule NAME's ticks in [--from, --to) again: one run each, in tick order (exit
    0 when every run succeeded, 1 otherwise)."""
    from sbroker.apps.pipeline.backfill import plan_backfill
    from sbroker.apps.pipeline.command import check_targets, spark_log_file, with_spark
    from sbroker.apps.pipeline.parser import PipelineError
    from sbroker.apps.pipeline.runner import pipeline_import_path

    if start is None or end is None:
        _usage("give the range of ticks with --from T1 --to T2 (ISO dates or times)")
    if not parallel.strip().isdigit():
        _usage(f"--parallel must be an integer >= 1, not {parallel!r}")
    with open_broker(ctx) as b:
        try:
            backfill = plan_backfill(b, name, start, end, reprocess=reprocess,
                                     parallel=int(parallel))
            with pipeline_import_path(backfill.pipeline):
                check_targets(backfill.pipeline)
            backfill.pipeline = with_spark(backfill.pipeline, None, None,
                                           spark_log_file(backfill.pipeline.name))
        except PipelineError as exc:
            _usage(exc.message if exc.path is None else str(exc))
        if not backfill.ticks:
            click.echo(f"backfill {name}: no tick of the schedule from {start} to {end}")
            return
        if submit:
            _submit(backfill)
            return
        with pipeline_import_path(backfill.pipeline), \
                running_executor(b, backfill.pipeline, max(4, backfill.parallel), True):
            code = _drive(backfill)
    log_file = backfill.pipeline.options.spark.log_file
    if log_file and Path(log_file).exists():
        click.echo(f"Spark's log: {log_file}")
    sys.exit(code)


def _submit(backfill: Backfill) -> None:
    """Print the id of each run recorded for the servers, one a line; skipped ticks on
    stderr."""
    for result in backfill.submit():
        if result.run_id is not None and result.status == "submitted":
            click.echo(result.run_id)
        else:
            click.echo(f"{result.scheduled_for}  {result.note}", err=True)


def _drive(backfill: Backfill) -> int:
    """Run the ticks here with a line as each run starts and ends; the exit code."""
    def line(result: TickResult) -> None:
        what = (f"run {result.run_id} {result.status}" if result.status != "skipped"
                else result.note)
        click.echo(f"{result.scheduled_for}  {what}")

    backfill.on_start = backfill.on_end = line
    ticks = len(backfill.ticks)
    click.echo(f"backfill {backfill.name}: {ticks} tick{'s' if ticks != 1 else ''} from"
               f" {backfill.when(backfill.ticks[0])} (reprocess {backfill.reprocess},"
               f" {backfill.parallel} at a time)")
    with sigterm_as_ctrl_c() as terminated:
        try:
            results = backfill.run()
        except KeyboardInterrupt:
            click.echo(f"backfill {backfill.name}: interrupted; the runs going were cancelled"
                       " (run them again with --reprocess failed)", err=True)
            return 128 + signal.SIGTERM if terminated else EXIT_INTERRUPTED
    ran = [r for r in results if r.ran]
    good = sum(1 for r in ran if r.status == "succeeded")
    click.echo(f"backfill {backfill.name}: {good} of {len(ran)} run{'s' if len(ran) != 1 else ''}"
               f" succeeded, {len(results) - len(ran)} tick"
               f"{'s' if len(results) - len(ran) != 1 else ''} skipped")
    return 0 if good == len(ran) else 1


COMMANDS = [schedule]
