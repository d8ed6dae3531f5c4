"""``sbroker run FILE``: a pipeline through the task scheduler as a durable run, with a
display; ``--resume``, ``--from``, ``--submit`` and ``--local`` (docs/pipelines.md)."""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

import click

from sbroker.cli.common import Broker, fail_cleanly

if TYPE_CHECKING:  # imported when a pipeline runs: the CLI starts without it
    from sbroker.apps.pipeline.model import Pipeline

Opener = Callable[["Pipeline"], contextlib.AbstractContextManager[Broker]]


@click.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE",
              help="Override a [params] value of the file (repeatable).")
@click.option("--resume", "resume", is_flag=False, flag_value="latest", default=None,
              metavar="[RUN_ID]",
              help="Resume the newest run of this pipeline that did not succeed, or RUN_ID:"
                   " its succeeded tasks are kept, the others run.")
@click.option("--from", "rerun_from", metavar="TASK",
              help="With --resume: run TASK and every task after it again, in the same run.")
@click.option("--submit", is_flag=True,
              help="Record a new run and return at once, printing its id: `sbroker serve`"
                   " processes on the database drive it.")
@click.option("--readers", type=click.IntRange(min=1), default=None,
              help="Executor readers (default: the pipeline's concurrency, at least 4).")
@click.option("--no-executor", is_flag=True,
              help="Run no executor here: `sbroker serve` on the same database runs the tasks.")
@click.option("--local", is_flag=True,
              help="Run on a throwaway database (a temporary file, removed after).")
@click.option("-v", "--verbose", is_flag=True, help="Show the traceback of each failed task.")
@click.option("--spark-master", metavar="URL",
              help="Run on this Spark master (local[4], spark://host:7077, ...) instead of"
                   " the file's spark.master.")
@click.option("--spark-remote", metavar="sc://HOST:PORT",
              help="Run on this Spark Connect server instead of the file's Spark settings.")
@click.pass_context
@fail_cleanly
def run(ctx: click.Context, file: str, params: tuple[str, ...], resume: str | None,
        rerun_from: str | None, submit: bool, readers: int | None, no_executor: bool,
        local: bool, verbose: bool, spark_master: str | None, spark_remote: str | None) -> None:
    """Run a pipeline FILE (TOML), or a Python pipeline FILE.py:ATTR or module:attr,
    through the task scheduler, as a durable run that `--resume` takes up where it
    stopped."""
    from sbroker.apps.pipeline.command import (
        EXIT_INTERRUPTED,
        LATEST,
        RunRequest,
        run_command,
    )

    _check_options(resume, rerun_from, submit, local, spark_master, spark_remote)
    if local:
        opener = local_broker(readers)
    elif submit:
        opener = _submit_broker(ctx.obj["db"])
    else:
        opener = _open_broker(ctx.obj["db"], readers, not no_executor)
    request = RunRequest(None if resume is None else LATEST if resume == "latest"
                         else int(resume), rerun_from, submit, throwaway=local)
    with sigterm_as_ctrl_c() as terminated:
        try:
            code, _ = run_command(file, list(params), open_broker=opener, request=request,
                                  verbose=verbose, spark_master=spark_master,
                                  spark_remote=spark_remote, spark_log=not submit)
        except KeyboardInterrupt:  # before the run started or after it ended
            click.echo("sbroker run: interrupted", err=True)
            code = EXIT_INTERRUPTED
    sys.exit(128 + signal.SIGTERM if terminated and code == EXIT_INTERRUPTED else code)


def _usage(message: str) -> NoReturn:
    """Bad options: one line, exit 2, nothing done."""
    click.echo(f"sbroker: error: {message}", err=True)
    sys.exit(2)


def _check_options(resume: str | None, rerun_from: str | None, submit: bool, local: bool,
                   spark_master: str | None, spark_remote: str | None) -> None:
    if spark_master and spark_remote:
        _usage("give --spark-master or --spark-remote, not both")
    if resume is not None and not (resume == "latest" or resume.isdigit()):
        _usage(f"--resume takes a run id (a number), not {resume!r}")
    if submit and resume is not None:
        _usage("--submit records a new run: it cannot --resume one (drop one of them)")
    if submit and local:
        _usage("--submit leaves the run to `sbroker serve` on the database: drop --local")
    if local and resume is not None:
        _usage("--resume needs the broker database: drop --local")
    if rerun_from is not None and resume is None:
        _usage("--from needs --resume [RUN_ID]: it runs a task of a recorded run again")


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[list[int]]:
    """SIGTERM (a service manager, `kill`) stops the run as Ctrl-C does: the running tasks
    are cancelled and the summary printed. The list yielded holds the signal once it came."""
    received: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def running_executor(broker: Broker, pipeline: Pipeline, readers: int | None,
                      executor: bool) -> Iterator[Broker]:
    """The executor installed on ``broker`` and, unless ``executor`` is False (then `sbroker
    serve` on the same database runs the tasks), started in this process."""
    concurrency = pipeline.options.concurrency
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


def _open_broker(db: str, readers: int | None, executor: bool) -> Opener:
    """The database given with --db, its executor here unless ``executor`` is False."""

    @contextlib.contextmanager
    def open_broker(pipeline: Pipeline) -> Iterator[Broker]:
        if "://" not in db:
            Path(db).parent.mkdir(parents=True, exist_ok=True)
        with Broker.open(db) as broker, running_executor(broker, pipeline, readers,
                                                          executor) as started:
            yield started

    return open_broker


def _submit_broker(db: str) -> Opener:
    """The database given with --db, with the executor installed (its servers run it)."""

    @contextlib.contextmanager
    def open_broker(pipeline: Pipeline) -> Iterator[Broker]:
        if "://" not in db:
            Path(db).parent.mkdir(parents=True, exist_ok=True)
        with Broker.open(db) as broker:
            if "ServiceAsyncTarget" not in broker.catalog.services:  # else keep its settings
                broker.install_executor(spark=pipeline.options.spark)
            yield broker

    return open_broker


def local_broker(readers: int | None) -> Opener:
    """A throwaway database (a temporary file, removed after) with the executor here."""

    @contextlib.contextmanager
    def open_broker(pipeline: Pipeline) -> Iterator[Broker]:
        from sbroker.apps.pipeline.command import throwaway_database

        with throwaway_database() as db, Broker.open(db) as broker, \
                running_executor(broker, pipeline, readers, True) as started:
            yield started

    return open_broker


COMMANDS = [run]
