"""``sbroker run FILE``: a pipeline through the task scheduler, with a live display."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import click

from sbroker.cli.common import Broker, fail_cleanly

if TYPE_CHECKING:  # imported when a pipeline runs: the CLI starts without it
    from sbroker.apps.pipeline.model import Pipeline


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE",
              help="Override a [params] value of the file (repeatable).")
@click.option("--resume", "resume", is_flag=False, flag_value="latest", default=None,
              metavar="[RUN_ID]",
              help="Resume the newest run of this pipeline that did not succeed, or RUN_ID:"
                   " its succeeded tasks are kept, the others run.")
@click.option("--readers", type=click.IntRange(min=1), default=None,
              help="Executor readers (default: the pipeline's concurrency, at least 4).")
@click.option("--no-executor", is_flag=True,
              help="Run no executor here: `sbroker serve` on the same database runs the tasks.")
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
def run(ctx: click.Context, file: str, params: tuple[str, ...], resume: str | None,
        readers: int | None, no_executor: bool, local: bool, verbose: bool,
        spark_master: str | None, spark_remote: str | None) -> None:
    """Run a pipeline FILE (TOML), or a Python pipeline FILE.py:ATTR or module:attr,
    through the task scheduler, as a durable run that `--resume` takes up where it
    stopped."""
    from sbroker.apps.pipeline.command import EXIT_INTERRUPTED, run_command
    from sbroker.apps.pipeline.durable_command import LATEST, run_durable_command

    if spark_master and spark_remote:
        raise click.UsageError("give --spark-master or --spark-remote, not both")
    if resume is not None and not (resume == "latest" or resume.isdigit()):
        raise click.UsageError(f"--resume takes a run id (a number), not {resume!r}")
    if local and resume is not None:
        raise click.UsageError("--resume needs the broker database: drop --local")
    with _sigterm_as_ctrl_c() as terminated:
        try:
            if local:
                code, _ = run_command(file, list(params), verbose=verbose,
                                      spark_master=spark_master, spark_remote=spark_remote,
                                      spark_log=True)
            else:
                code, _ = run_durable_command(
                    file, list(params), verbose=verbose,
                    open_broker=_open_broker(ctx.obj["db"], readers, not no_executor),
                    resume=None if resume is None else
                    LATEST if resume == "latest" else int(resume),
                    spark_master=spark_master, spark_remote=spark_remote, spark_log=True)
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


def _open_broker(db: str, readers: int | None, executor: bool
                 ) -> Callable[[Pipeline], contextlib.AbstractContextManager[Broker]]:
    """Open the broker and install the executor; start it here unless ``executor`` is
    False (then `sbroker serve` on the same database runs the tasks)."""

    @contextlib.contextmanager
    def open_broker(pipeline: Pipeline) -> Iterator[Broker]:
        if "://" not in db:
            Path(db).parent.mkdir(parents=True, exist_ok=True)
        concurrency = pipeline.options.concurrency
        with Broker.open(db) as broker:
            broker.install_executor(max_queue_readers=readers or max(concurrency or 4, 4),
                                    spark=pipeline.options.spark)
            if executor:
                broker.start()
            try:
                yield broker
            finally:
                state = broker.executor_state(create=False)
                broker.stop()
                if state is not None:
                    state.runner.close()

    return open_broker


COMMANDS = [run]
