"""``sbroker run FILE``: load, check, run with a display, report; returns the exit code.

The CLI calls ``run_command``. ``open_scheduler`` decides where tasks run: the broker's
scheduler (``broker.scheduler(...)``) or, by default, a ``LocalScheduler`` on a
``SparkRunner`` in this process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
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

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_USAGE", "check_targets",
           "local_scheduler", "pipeline_import_path", "run_command"]

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
    for stage in pipeline.stages:
        for spec in stage.tasks:
            if isinstance(spec.task, PythonTask):
                try:
                    resolve_target(spec.task.target)
                except (ImportError, AttributeError, TypeError) as exc:
                    raise PipelineError(
                        f"task {spec.name!r} of stage {stage.name!r}: cannot use "
                        f"{spec.task.target!r}: {exc}", path=pipeline.path, line=spec.line
                    ) from None


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


def with_spark(pipeline: Pipeline, master: str | None, remote: str | None) -> Pipeline:
    """``pipeline`` with its Spark master or Connect URL replaced (when one is given)."""
    if master is None and remote is None:
        return pipeline
    current = pipeline.options.spark
    try:
        spark = SparkConfig(master=master, remote=remote, conf=current.conf,
                            app_name=current.app_name, connect_timeout=current.connect_timeout)
    except ValueError as exc:
        raise PipelineError(str(exc), path=pipeline.path) from None
    return dataclasses.replace(pipeline,
                               options=dataclasses.replace(pipeline.options, spark=spark))


def run_command(path: str | Path, params: Sequence[str] = (), *,
                console: Console | None = None,
                open_scheduler: OpenScheduler | None = None,
                monitor: TaskMonitor | None = None,
                verbose: bool = False,
                spark_master: str | None = None,
                spark_remote: str | None = None) -> tuple[int, PipelineRun | None]:
    """Run a pipeline file; returns (exit code, the run). Problems with the file are one
    line on stderr and exit code 2; a failed stage gives 1; Ctrl-C gives 130. ``verbose``
    shows the traceback of each failed task; ``spark_master`` / ``spark_remote`` replace
    the file's ``spark.master`` / ``spark.remote`` (its ``spark_conf`` is kept)."""
    console = console or Console()
    try:
        pipeline = with_spark(load_pipeline(path, parse_param_overrides(list(params))),
                              spark_master, spark_remote)
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
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return EXIT_USAGE, None
    if run.interrupted:
        return EXIT_INTERRUPTED, run
    return (0 if run.ok else EXIT_FAILED), run
