"""Running a pipeline through a scheduler: stage after stage, stop at the first failed one.

Each stage is what seed 002 calls a series: every task is sent with ``exec_async``, then
``synchronize`` is called once per task. The next stage starts only when all results are
in and all succeeded. The state of the run lives in ``PipelineRun`` (mutable, read by the
display) and observers hear of every change.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from sbroker.apps.pipeline.model import Pipeline, Stage, TaskSpec
from sbroker.apps.pipeline.scheduler import Scheduler
from sbroker.apps.spark.tasks import TaskResult

__all__ = ["PipelineRun", "RunObserver", "StageRun", "TaskRun", "run_pipeline"]

TaskState = Literal["pending", "queued", "succeeded", "failed", "cancelled"]
StageState = Literal["pending", "running", "succeeded", "failed", "cancelled", "skipped"]
_DRAIN_SECONDS = 10.0


@dataclass
class TaskRun:
    """One task of a run: its log id once sent, its result once finished."""

    spec: TaskSpec
    state: TaskState = "pending"
    log_id: int | None = None
    result: TaskResult | None = None
    sent_at: float | None = None
    finished_at: float | None = None

    @property
    def seconds(self) -> float | None:
        """Run time from the result (executor clock), else time since it was sent."""
        if self.result is not None and self.result.seconds is not None:
            return self.result.seconds
        if self.sent_at is None:
            return None
        return (self.finished_at or time.monotonic()) - self.sent_at


@dataclass
class StageRun:
    """One stage of a run."""

    stage: Stage
    tasks: list[TaskRun]
    state: StageState = "pending"
    started_at: float | None = None
    finished_at: float | None = None

    @property
    def seconds(self) -> float | None:
        """Wall-clock time of the stage."""
        if self.started_at is None:
            return None
        return (self.finished_at or time.monotonic()) - self.started_at

    @property
    def failed(self) -> list[TaskRun]:
        """Tasks that finished without succeeding."""
        return [t for t in self.tasks if t.state in ("failed", "cancelled")]


@dataclass
class PipelineRun:
    """The whole run; ``ok`` once every stage succeeded."""

    pipeline: Pipeline
    stages: list[StageRun]
    started_at: float = field(default_factory=time.monotonic)
    finished_at: float | None = None
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        """True when every stage succeeded."""
        return all(s.state == "succeeded" for s in self.stages)

    @property
    def failed_stage(self) -> StageRun | None:
        """The stage that stopped the run, if any."""
        return next((s for s in self.stages if s.state in ("failed", "cancelled")), None)

    @property
    def seconds(self) -> float:
        """Wall-clock time of the run."""
        return (self.finished_at or time.monotonic()) - self.started_at


class RunObserver:
    """Hooks called by ``run_pipeline`` on its own thread; the default does nothing."""

    def pipeline_started(self, run: PipelineRun) -> None:
        """Before the first stage."""

    def stage_started(self, run: PipelineRun, stage: StageRun) -> None:
        """All tasks of the stage were sent."""

    def task_finished(self, run: PipelineRun, stage: StageRun, task: TaskRun) -> None:
        """A result came back."""

    def stage_finished(self, run: PipelineRun, stage: StageRun) -> None:
        """Every result of the stage is in."""

    def pipeline_finished(self, run: PipelineRun) -> None:
        """After the last stage, a failed one, or an interruption."""


def run_pipeline(pipeline: Pipeline, scheduler: Scheduler, *,
                 observer: RunObserver | None = None,
                 clock: Callable[[], float] = time.monotonic) -> PipelineRun:
    """Run every stage in order through ``scheduler``; never raises for a failed task.

    On ``KeyboardInterrupt`` the stage's unfinished tasks are cancelled, their results
    collected for a few seconds, and the run returns with ``interrupted`` set.
    """
    observer = observer or RunObserver()
    run = PipelineRun(pipeline, [StageRun(s, [TaskRun(t) for t in s.tasks])
                                 for s in pipeline.stages], started_at=clock())
    observer.pipeline_started(run)
    try:
        for stage in run.stages:
            _run_stage(run, stage, scheduler, observer, clock)
            if stage.state != "succeeded":
                break
    finally:
        for stage in run.stages:
            if stage.state == "pending":
                stage.state = "skipped"
        run.finished_at = clock()
        observer.pipeline_finished(run)
    return run


def _run_stage(run: PipelineRun, stage: StageRun, scheduler: Scheduler,
               observer: RunObserver, clock: Callable[[], float]) -> None:
    stage.state = "running"
    stage.started_at = clock()
    by_log_id: dict[int, TaskRun] = {}
    try:
        for task in stage.tasks:
            task.log_id = scheduler.exec_async(task.spec.task)
            task.state = "queued"
            task.sent_at = clock()
            by_log_id[task.log_id] = task
        observer.stage_started(run, stage)
        while any(t.state == "queued" for t in stage.tasks):
            _record(run, stage, by_log_id, scheduler.synchronize(), observer, clock)
    except KeyboardInterrupt:
        run.interrupted = True
        _cancel_rest(run, stage, by_log_id, scheduler, observer, clock)
    stage.finished_at = clock()
    if run.interrupted:
        stage.state = "cancelled"
    elif stage.failed:
        stage.state = "failed"
    else:
        stage.state = "succeeded"
    observer.stage_finished(run, stage)


def _record(run: PipelineRun, stage: StageRun, by_log_id: dict[int, TaskRun],
            result: TaskResult, observer: RunObserver, clock: Callable[[], float]) -> None:
    task = by_log_id.get(result.log_id)
    if task is None or task.state != "queued":
        return  # not ours (a scheduler reused across runs) or already recorded
    task.result = result
    task.state = result.status
    task.finished_at = clock()
    observer.task_finished(run, stage, task)


def _cancel_rest(run: PipelineRun, stage: StageRun, by_log_id: dict[int, TaskRun],
                 scheduler: Scheduler, observer: RunObserver,
                 clock: Callable[[], float]) -> None:
    pending = [t for t in stage.tasks if t.state == "queued" and t.log_id is not None]
    for task in pending:
        scheduler.cancel(task.log_id)  # type: ignore[arg-type]
    deadline = time.monotonic() + _DRAIN_SECONDS
    try:
        while any(t.state == "queued" for t in stage.tasks):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            _record(run, stage, by_log_id, scheduler.synchronize(timeout=left), observer, clock)
    except (TimeoutError, KeyboardInterrupt):
        pass
    for task in stage.tasks:
        if task.state in ("pending", "queued"):
            task.state = "cancelled"
            task.finished_at = clock()
