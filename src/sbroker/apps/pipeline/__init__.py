"""Pipeline files (TOML tasks with dependencies, or stages of tasks) and running them, all
through one durable runner (docs/pipelines.md).

The Python API of durable runs::

    pipeline = load_pipeline("orders.toml", {"rows": "1000"})
    state = start_run(broker, pipeline)          # a new run, until it ends
    state = resume_run(broker, pipeline)         # its newest run that did not succeed
    run_id = submit_run(broker, pipeline)        # a run for `sbroker serve` to drive
    wait_run(broker, run_id); cancel_run(broker, run_id)
    list_runs(broker, "orders"); get_run(broker, state.run_id)
    plan_backfill(broker, "nightly", "2026-01-01", "2026-01-08").run()  # one run per tick
"""

from __future__ import annotations

from sbroker.apps.pipeline.backfill import Backfill, TickResult, plan_backfill
from sbroker.apps.pipeline.command import check_targets, run_command
from sbroker.apps.pipeline.control import cancel_run, submit_run, wait_run
from sbroker.apps.pipeline.leases import LeaseHeld, LeaseLost
from sbroker.apps.pipeline.listeners import Listeners, RunListener
from sbroker.apps.pipeline.model import (
    Options,
    Pipeline,
    Retry,
    RunStatus,
    Schedule,
    Stage,
    TaskSpec,
    TaskStatus,
)
from sbroker.apps.pipeline.parser import (
    PipelineError,
    load_pipeline,
    parse_param_overrides,
    parse_pipeline,
)
from sbroker.apps.pipeline.rundisplay import RunDisplay, render_run_report
from sbroker.apps.pipeline.runner import DurableRunner, resume_run, start_run
from sbroker.apps.pipeline.runs import get_run, list_runs, run_attempts
from sbroker.apps.pipeline.runstate import RunState, TaskState
from sbroker.apps.pipeline.service import PipelineService

__all__ = [
    "Backfill",
    "DurableRunner",
    "LeaseHeld",
    "LeaseLost",
    "Listeners",
    "Options",
    "Pipeline",
    "PipelineError",
    "PipelineService",
    "Retry",
    "RunDisplay",
    "RunListener",
    "RunState",
    "RunStatus",
    "Schedule",
    "Stage",
    "TaskSpec",
    "TaskState",
    "TaskStatus",
    "TickResult",
    "cancel_run",
    "check_targets",
    "get_run",
    "list_runs",
    "load_pipeline",
    "parse_param_overrides",
    "parse_pipeline",
    "plan_backfill",
    "render_run_report",
    "resume_run",
    "run_attempts",
    "run_command",
    "start_run",
    "submit_run",
    "wait_run",
]
