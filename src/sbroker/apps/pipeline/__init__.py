"""Pipeline files (TOML tasks with dependencies, or stages of tasks) and running them.

The Python API of durable runs (SPEC §13)::

    pipeline = load_pipeline("orders.toml", {"rows": "1000"})
    state = start_run(broker, pipeline)          # a new run, until it ends
    state = resume_run(broker, pipeline)         # its newest run that did not succeed
    list_runs(broker, "orders"); get_run(broker, state.run_id)
"""

from __future__ import annotations

from sbroker.apps.pipeline.command import check_targets, local_scheduler, run_command
from sbroker.apps.pipeline.display import (
    LiveDisplay,
    PlainDisplay,
    make_display,
    render_report,
)
from sbroker.apps.pipeline.durable import DurableRunner, resume_run, start_run
from sbroker.apps.pipeline.model import (
    Options,
    Pipeline,
    Retry,
    Schedule,
    Stage,
    TaskSpec,
)
from sbroker.apps.pipeline.parser import (
    PipelineError,
    load_pipeline,
    parse_param_overrides,
    parse_pipeline,
)
from sbroker.apps.pipeline.run import (
    PipelineRun,
    RunObserver,
    StageRun,
    TaskRun,
    run_pipeline,
)
from sbroker.apps.pipeline.runs import get_run, list_runs, run_attempts
from sbroker.apps.pipeline.runstate import RunListener, RunState, TaskState
from sbroker.apps.pipeline.scheduler import LocalScheduler, Scheduler, TaskMonitor

__all__ = [
    "DurableRunner",
    "LiveDisplay",
    "LocalScheduler",
    "Options",
    "Pipeline",
    "PipelineError",
    "PipelineRun",
    "PlainDisplay",
    "Retry",
    "RunListener",
    "RunObserver",
    "RunState",
    "Schedule",
    "Scheduler",
    "Stage",
    "StageRun",
    "TaskMonitor",
    "TaskRun",
    "TaskSpec",
    "TaskState",
    "check_targets",
    "get_run",
    "list_runs",
    "load_pipeline",
    "local_scheduler",
    "make_display",
    "parse_param_overrides",
    "parse_pipeline",
    "render_report",
    "resume_run",
    "run_attempts",
    "run_command",
    "run_pipeline",
    "start_run",
]
