"""``sbroker run FILE``: load, check, run with a display, report; returns the exit code.

The CLI calls ``run_command``. ``open_scheduler`` decides where tasks run: the broker's
scheduler (``broker.scheduler(...)``) or, by default, a ``LocalScheduler`` on a
``SparkRunner`` in this process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from rich.console import Console

from sbroker.apps.pipeline.display import make_display
from sbroker.apps.pipeline.model import Pipeline
from sbroker.apps.pipeline.parser import PipelineError, load_pipeline, parse_param_overrides
from sbroker.apps.pipeline.record import Observers, recorder_for
from sbroker.apps.pipeline.run import PipelineRun, run_pipeline
from sbroker.apps.pipeline.scheduler import LocalScheduler, Scheduler, TaskMonitor
from sbroker.apps.spark.config import SparkConfig
from sbroker.apps.spark.runner import Runner
from sbroker.apps.spark.tasks import PythonTask, resolve_target

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_USAGE", "check_targets", "exit_code",
           "local_scheduler", "pipeline_import_path", "run_command", "usage_error"]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
OpenScheduler = Callable[[Pipeline], AbstractContextManager[Scheduler]]


@contextlib.contextmanager
def pipeline_import_path(pipeline: Pipeline) -> Iterator[None]:
    """Put the pipeline file's folder first on ``sys.path`` so ``python =`` targets import."""
    folder = str(pipeline.base_dir)
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        yield
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)


def check_targets(pipeline: Pipeline) -> None:
    """Import every ``python =`` target now, so a typo fails before any Spark work."""
    for spec in pipeline.dag:
        if isinstance(spec.task, PythonTask):
            stage, _, name = spec.name.rpartition("/")
            where = f"task {name!r}" + (f" of stage {stage!r}" if stage else "")
            try:
                resolve_target(spec.task.target)
            except (ImportError, AttributeError, TypeError) as exc:
                raise PipelineError(
                    f"{where}: cannot use {spec.task.target!r}: {exc}", path=pipeline.path,
                    line=spec.line) from None


def local_scheduler(runner_factory: Callable[[Pipeline], Runner] | None = None) -> OpenScheduler:
    """A scheduler opener with no broker: a thread pool over a (by default Spark) runner."""

    @contextlib.contextmanager
    def open_local(pipeline: Pipeline) -> Iterator[Scheduler]:
        if runner_factory is None:
            from sbroker.apps.spark.session import SparkRunner

            runner: Runner = SparkRunner(pipeline.options.spark)
        else:
            runner = runner_factory(pipeline)
        try:
            with LocalScheduler(runner, max_concurrency=pipeline.options.concurrency,
                                pool=pipeline.name) as scheduler:
                yield scheduler
        finally:
            runner.close()

    return open_local


def with_spark(pipeline: Pipeline, master: str | None, remote: str | None,
               log_file: str | None = None) -> Pipeline:
    """``pipeline`` with its Spark master or Connect URL replaced (when one is given), and
    Spark's log sent to ``log_file`` unless the file names one."""
    current = pipeline.options.spark
    log_file = current.log_file or log_file
    if master is None and remote is None and log_file == current.log_file:
        return pipeline
    if master is None and remote is None:
        master, remote = current.master, current.remote
    try:
        spark = SparkConfig(master=master, remote=remote, conf=current.conf,
                            app_name=current.app_name, connect_timeout=current.connect_timeout,
                            log_file=log_file)
    except ValueError as exc:
        raise PipelineError(str(exc), path=pipeline.path) from None
    return dataclasses.replace(pipeline,
                               options=dataclasses.replace(pipeline.options, spark=spark))


def spark_log_file(pipeline_name: str, folder: str | Path = "out/spark-logs") -> str:
    """Where ``sbroker run`` keeps Spark's log for one run of a pipeline."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return str(Path(folder) / f"{pipeline_name}-{stamp}-{os.getpid()}.log")


def run_command(path: str | Path, params: Sequence[str] = (), *,
                console: Console | None = None,
                open_scheduler: OpenScheduler | None = None,
                monitor: TaskMonitor | None = None,
                verbose: bool = False,
                spark_master: str | None = None,
                spark_remote: str | None = None,
                spark_log: bool = False) -> tuple[int, PipelineRun | None]:
    """Run a pipeline file; returns (exit code, the run). Problems with the file are one
    line on stderr and exit code 2; a failed stage gives 1; Ctrl-C gives 130. ``verbose``
    shows the traceback of each failed task; ``spark_master`` / ``spark_remote`` replace
    the file's ``spark.master`` / ``spark.remote`` (its ``spark_conf`` is kept);
    ``spark_log`` keeps Spark's output in a file under ``out/spark-logs/`` (unless the file
    names one in ``spark.log_file``) and says where at the end."""
    console = console or Console()
    try:
        pipeline = load_pipeline(path, parse_param_overrides(list(params)))
        pipeline = with_spark(pipeline, spark_master, spark_remote,
                              spark_log_file(pipeline.name) if spark_log else None)
        if not pipeline.stages:
            raise PipelineError("a pipeline of [[task]] entries runs on a broker database "
                                "(run it without --local)", path=pipeline.path)
        with pipeline_import_path(pipeline):
            check_targets(pipeline)
            with (open_scheduler or local_scheduler())(pipeline) as scheduler:
                if monitor is None and isinstance(scheduler, TaskMonitor):
                    monitor = scheduler
                display = make_display(console, monitor, verbose=verbose)
                recorder = recorder_for(scheduler)  # stage names for the dashboard
                run = run_pipeline(pipeline, scheduler, observer=display if recorder is None
                                   else Observers(display, recorder))
    except PipelineError as exc:
        return usage_error(exc), None
    return exit_code(pipeline, console, run.interrupted, run.ok), run


def usage_error(exc: PipelineError) -> int:
    """Say what is wrong with the file or the options in one line; exit code 2."""
    print(f"sbroker: error: {exc}", file=sys.stderr, flush=True)
    return EXIT_USAGE


def exit_code(pipeline: Pipeline, console: Console, interrupted: bool, ok: bool) -> int:
    """Say where Spark's log is, and the run's exit code (0, 1, or 130 interrupted)."""
    log_file = pipeline.options.spark.log_file
    if log_file and Path(log_file).exists():
        console.print(f"Spark's log: {log_file}", highlight=False, soft_wrap=True)
    if interrupted:
        return EXIT_INTERRUPTED
    return 0 if ok else EXIT_FAILED
