"""``sbroker run FILE``: a pipeline through the task scheduler, with a live display."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import click

from sbroker.cli.common import Broker, fail_cleanly


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE",
              help="Override a [params] value of the file (repeatable).")
@click.option("--readers", type=click.IntRange(min=1), default=None,
              help="Executor readers (default: the pipeline's concurrency, at least 4).")
@click.option("--local", is_flag=True,
              help="Run on a thread pool in this process, without a broker database.")
@click.option("-v", "--verbose", is_flag=True, help="Show the traceback of each failed task.")
@click.option("--spark-master", metavar="URL",
              help="Run on this Spark master (local[4], spark://host:7077, ...) instead of"
                   " the file's spark.master.")
@click.option("--spark-remote", metavar="sc://HOST:PORT",
              help="Run on this Spark Connect server instead of the file's Spark settings.")
@click.pass_context
@fail_cleanly
def run(ctx: click.Context, file: str, params: tuple[str, ...], readers: int | None,
        local: bool, verbose: bool, spark_master: str | None,
        spark_remote: str | None) -> None:
    """Run a pipeline FILE (TOML) through the task scheduler, with a live display."""
    from sbroker.apps.pipeline.command import EXIT_INTERRUPTED, run_command

    if spark_master and spark_remote:
        raise click.UsageError("give --spark-master or --spark-remote, not both")
    opener = None if local else _broker_scheduler(ctx.obj["db"], readers)
    with _sigterm_as_ctrl_c() as terminated:
        try:
            code, _ = run_command(file, list(params), open_scheduler=opener, verbose=verbose,
                                  spark_master=spark_master, spark_remote=spark_remote,
                                  spark_log=True)
        except KeyboardInterrupt:  # before the first stage or after the last one
            click.echo("sbroker run: interrupted", err=True)
            code = EXIT_INTERRUPTED
    sys.exit(128 + signal.SIGTERM if terminated and code == EXIT_INTERRUPTED else code)


@contextlib.contextmanager
def _sigterm_as_ctrl_c() -> Iterator[list[int]]:
    """SIGTERM (a service manager, `kill`) stops the run as Ctrl-C does: the running stage is
    cancelled and the summary printed. The list yielded holds the signal once it came."""
    received: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def _broker_scheduler(db: str, readers: int | None) -> Any:
    """Open the broker, install and start the executor, and hand out one scheduler."""

    @contextlib.contextmanager
    def open_broker(pipeline: Any) -> Iterator[Any]:
        Path(db).parent.mkdir(parents=True, exist_ok=True)
        concurrency = pipeline.options.concurrency
        with Broker.open(db) as broker:
            broker.install_executor(max_queue_readers=readers or max(concurrency or 4, 4),
                                    spark=pipeline.options.spark)
            broker.start()
            try:
                with broker.scheduler(pipeline.name, max_concurrency=concurrency) as scheduler:
                    yield scheduler
            finally:
                state = broker.executor_state(create=False)
                broker.stop()
                if state is not None:
                    state.runner.close()

    return open_broker


COMMANDS = [run]
