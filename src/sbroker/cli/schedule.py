"""``sbroker schedule add | list | remove``: pipeline files started on a schedule by
`sbroker serve` (SPEC §13)."""

from __future__ import annotations

import json
import sys

import click
from rich.console import Console

from sbroker.cli.common import fail_cleanly, open_broker
from sbroker.cli.tables import print_rows


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


COMMANDS = [schedule]
