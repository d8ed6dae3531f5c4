"""``sbroker run FILE [--resume [RUN_ID]]`` on a broker database: load and check the file,
create or resume a durable run, drive it with a display; returns the exit code (SPEC §13:
0 succeeded, 1 a task failed, 2 a problem with the file or its options, 130 interrupted)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from rich.console import Console

from sbroker.apps.pipeline.command import (
    check_targets,
    exit_code,
    pipeline_import_path,
    spark_log_file,
    usage_error,
    with_spark,
)
from sbroker.apps.pipeline.durable import DurableRunner, latest_unfinished
from sbroker.apps.pipeline.loading import load_definition
from sbroker.apps.pipeline.model import Pipeline
from sbroker.apps.pipeline.parser import PipelineError, parse_param_overrides
from sbroker.apps.pipeline.rundisplay import RunDisplay
from sbroker.apps.pipeline.runstate import RunState
from sbroker.engine.api import BrokerAPI

__all__ = ["LATEST", "run_durable_command"]
LATEST = 0  # ``resume=LATEST``: the newest run of the pipeline that did not succeed
OpenBroker = Callable[[Pipeline], AbstractContextManager[BrokerAPI]]


def run_durable_command(path: str | Path, params: Sequence[str] = (), *,
                        open_broker: OpenBroker, resume: int | None = None,
                        console: Console | None = None, verbose: bool = False,
                        spark_master: str | None = None, spark_remote: str | None = None,
                        spark_log: bool = False) -> tuple[int, RunState | None]:
    """Run (or, with ``resume``, resume) the pipeline file on the broker ``open_broker``
    yields; problems with the file or the run to resume are one line on stderr, exit 2."""
    console = console or Console()
    try:
        pipeline = load_definition(path, parse_param_overrides(list(params)))
        pipeline = with_spark(pipeline, spark_master, spark_remote,
                              spark_log_file(pipeline.name) if spark_log else None)
        with pipeline_import_path(pipeline):
            check_targets(pipeline)
            with open_broker(pipeline) as broker:
                runner = DurableRunner(broker, pipeline,
                                       listener=RunDisplay(console, verbose=verbose))
                state = runner.resume(_run_to_resume(broker, pipeline, resume)) \
                    if resume is not None else runner.create()
                state = runner.drive(state)
    except PipelineError as exc:
        return usage_error(exc), None
    return exit_code(pipeline, console, state.interrupted, state.ok), state


def _run_to_resume(broker: BrokerAPI, pipeline: Pipeline, resume: int) -> int:
    if resume != LATEST:
        return resume
    run_id = latest_unfinished(broker, pipeline.name)
    if run_id is None:
        raise PipelineError(f"no run of pipeline {pipeline.name!r} to resume (none, or every"
                            " one succeeded)", path=pipeline.path)
    return run_id
