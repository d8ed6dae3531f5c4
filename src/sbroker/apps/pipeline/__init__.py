"""Pipeline files (TOML stages of tasks) and running them through a scheduler."""

from __future__ import annotations

from sbroker.apps.pipeline.command import check_targets, local_scheduler, run_command
from sbroker.apps.pipeline.display import (
    LiveDisplay,
    PlainDisplay,
    make_display,
    render_report,
)
from sbroker.apps.pipeline.model import (
    Options,
    Pipeline,
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
from sbroker.apps.pipeline.scheduler import LocalScheduler, Scheduler, TaskMonitor

__all__ = [
    "LiveDisplay",
    "LocalScheduler",
    "Options",
    "Pipeline",
    "PipelineError",
    "PipelineRun",
    "PlainDisplay",
    "RunObserver",
    "Scheduler",
    "Stage",
    "StageRun",
    "TaskMonitor",
    "TaskRun",
    "TaskSpec",
    "check_targets",
    "load_pipeline",
    "local_scheduler",
    "make_display",
    "parse_param_overrides",
    "parse_pipeline",
    "render_report",
    "run_command",
    "run_pipeline",
]
