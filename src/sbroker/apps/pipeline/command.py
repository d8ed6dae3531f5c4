"""``sbroker run FILE [--resume [RUN_ID] [--from TASK] | --submit | --local]``: load and
check the file, create, resume or submit a durable run, drive it with a display; returns the
exit code (docs/pipelines.md: 0 succeeded, 1 a task failed or the run was cancelled, 2 a
problem with the file, its options or the run to resume, 130 interrupted).

Every way of running goes through the one durable runner: ``--local`` runs it on a throwaway
database (a temporary file, removed after) with the executor in this process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from rich.console import Console

from sbroker.apps.pipeline.control import run_exit_code, submit_run, wait_run
from sbroker.apps.pipeline.leases import LeaseHeld
from sbroker.apps.pipeline.loading import check_targets, load_definition
from sbroker.apps.pipeline.model import Pipeline, RunStatus
from sbroker.apps.pipeline.parser import PipelineError, parse_param_overrides
from sbroker.apps.pipeline.rundisplay import RunDisplay
from sbroker.apps.pipeline.runner import DurableRunner, pipeline_import_path
from sbroker.apps.pipeline.runstate import RunState
from sbroker.apps.pipeline.store import RunStore
from sbroker.apps.spark.config import SparkConfig
from sbroker.engine.api import BrokerAPI

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_USAGE", "LATEST", "check_targets",
           "exit_code", "run_command", "usage_error", "with_spark"]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
LATEST = 0  # ``resume=LATEST``: the newest run of the pipeline that did not succeed
OpenBroker = Callable[[Pipeline], AbstractContextManager[BrokerAPI]]


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


@contextlib.contextmanager
def throwaway_database() -> Iterator[Path]:
    """A broker database file for one run (``--local``), removed with its folder after."""
    with tempfile.TemporaryDirectory(prefix="sbroker-local-") as folder:
        yield Path(folder) / "run.db"


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """What ``sbroker run`` was asked: a new run, a resume (``resume``: a run id, or
    ``LATEST``) from a task on, or a run submitted for the servers."""

    resume: int | None = None
    rerun_from: str | None = None
    submit: bool = False
    throwaway: bool = False  # --local: the database goes after the run (no resume to offer)


def run_command(path: str | Path, params: Sequence[str] = (), *, open_broker: OpenBroker,
                request: RunRequest | None = None, console: Console | None = None,
                verbose: bool = False, spark_master: str | None = None,
                spark_remote: str | None = None,
                spark_log: bool = False) -> tuple[int, RunState | None]:
    """Run, resume or submit the pipeline file on the broker ``open_broker`` yields;
    problems with the file or the run to resume are one line on stderr, exit 2.
    ``verbose`` shows the traceback of each failed task; ``spark_master`` /
    ``spark_remote`` replace the file's; ``spark_log`` keeps Spark's output in a file under
    ``out/spark-logs/`` (unless the file names one) and says where at the end."""
    console = console or Console()
    request = request or RunRequest()
    try:
        pipeline = load_definition(path, parse_param_overrides(list(params)))
        pipeline = with_spark(pipeline, spark_master, spark_remote,
                              spark_log_file(pipeline.name) if spark_log else None)
        with pipeline_import_path(pipeline):
            check_targets(pipeline)
            with open_broker(pipeline) as broker:
                if request.submit:
                    print(submit_run(broker, pipeline), flush=True)
                    return 0, None
                runner = DurableRunner(broker, pipeline, listener=RunDisplay(
                    console, verbose=verbose, resumable=not request.throwaway))
                state = _take_up(broker, runner, request, console)
                if state is None:
                    return 0, None
                state = runner.drive(state)
                if state.lost:
                    return _follow(broker, state, console), state
    except LeaseHeld as held:
        return usage_error(PipelineError(
            f"run {held.run_id} is being driven by {held.host} (pid {held.pid}): wait for it"
            f" with `sbroker runs wait {held.run_id}`, or cancel it with `sbroker runs cancel"
            f" {held.run_id}`")), None
    except PipelineError as exc:
        return usage_error(exc), None
    return exit_code(pipeline, console, state.interrupted, state.ok), state


def _take_up(broker: BrokerAPI, runner: DurableRunner, request: RunRequest,
             console: Console) -> RunState | None:
    """The run to drive: new, or the one to resume; None when every run of the pipeline
    succeeded (said here)."""
    pipeline = runner.pipeline
    if request.resume is None:
        if request.rerun_from is not None:
            raise PipelineError("--from needs --resume: it runs a task of a run again")
        return runner.create()
    run_id = request.resume
    if run_id == LATEST:
        store = RunStore(broker)
        found = store.latest_unfinished(pipeline.name)
        if found is None and store.run_count(pipeline.name) and request.rerun_from is None:
            console.print(f"every run of pipeline {pipeline.name} succeeded: nothing to resume",
                          highlight=False, soft_wrap=True)
            return None
        if found is None:
            raise PipelineError(f"no run of pipeline {pipeline.name!r} to resume (none, or"
                                " every one succeeded: give its RUN_ID with --from)",
                                path=pipeline.path)
        run_id = found
    return runner.resume(run_id, rerun_from=request.rerun_from)


def _follow(broker: BrokerAPI, state: RunState, console: Console) -> int:
    """This process lost the run's lease to another (it was paused or cut off past it):
    follow the run to its end, and exit as it ends."""
    console.print(f"run {state.run_id}: following it to its end", highlight=False)
    status = wait_run(broker, state.run_id)
    console.print(f"run {state.run_id} ended {status}", highlight=False)
    return run_exit_code(status or RunStatus.FAILED)


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
