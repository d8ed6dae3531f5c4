"""A parsed pipeline file: stages of tasks and the options they run with (frozen data), and
the one status type of tasks and runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType

from sbroker.apps.spark.config import SparkConfig
from sbroker.apps.spark.tasks import Task

__all__ = ["CALL_TARGET", "DEFAULT_LEASE", "PIPELINE_KEY", "TASK_KEY", "Options", "Pipeline",
           "Retry", "RunStatus", "Schedule", "Stage", "TaskSpec", "TaskStatus"]

DEFAULT_LEASE = 30.0  # seconds a driver's lease on its run lasts unless renewed
#: A Python pipeline's task is sent as ``PythonTask(CALL_TARGET, **{PIPELINE_KEY: its
#: pipeline's source, TASK_KEY: its name}, **its arguments)`` (apps/pipeline/python.py)
CALL_TARGET = "sbroker.apps.pipeline.loading:call_task"
PIPELINE_KEY, TASK_KEY = "@pipeline", "@task"


class TaskStatus(StrEnum):
    """A task of a run (docs/pipelines.md): the only status type tasks have."""

    PENDING = "pending"
    RUNNING = "running"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"

    @property
    def ended(self) -> bool:
        """Nothing more happens to the task in this run (until a resume)."""
        return self in _ENDED


_ENDED = frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.SKIPPED,
                    TaskStatus.CANCELLED})


class RunStatus(StrEnum):
    """A run: ``skipped`` is a schedule's tick not run because the run before still went."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class Retry:
    """How a failed task is tried again: ``retries`` more attempts, the n-th after
    ``delay * backoff ** (n - 1)`` seconds, never more than ``max_delay``."""

    retries: int = 0
    delay: float = 10.0
    backoff: float = 2.0
    max_delay: float = 600.0

    def delay_before(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first retry)."""
        return float(min(self.max_delay, self.delay * self.backoff ** max(0, retry - 1)))


@dataclass(frozen=True)
class TaskSpec:
    """One task: its name, the task to send, its line in the file, the tasks it comes
    after, how it is retried and how long an attempt may run (``None``: no limit).

    ``map`` names the task over whose value (a list) it runs once per item; ``inputs`` are
    the keyword arguments the runner adds when it sends an attempt: ``item`` (a mapped
    task's item), ``scheduled_for`` / ``scheduled_date`` (the run's), or a task's name
    (that task's value); ``code`` is a digest of a Python function's source (what
    "changed" means for it on a resume, docs/pipelines.md)."""

    name: str
    task: Task
    line: int | None = None
    after: tuple[str, ...] = ()
    retry: Retry = field(default_factory=Retry)
    timeout: float | None = None
    map: str | None = None
    inputs: tuple[str, ...] = ()
    code: str | None = None


@dataclass(frozen=True)
class Schedule:
    """``[schedule]``: every ``every`` seconds or on a five-field ``cron`` in ``timezone``;
    at most ``max_active_runs`` of its runs (scheduled and backfilled) in flight at once."""

    every: float | None = None
    cron: str | None = None
    timezone: str = "UTC"
    catchup: bool = False
    overlap: str = "skip"
    max_active_runs: int = 1


@dataclass(frozen=True)
class Stage:
    """One ``[[stage]]``: tasks that run concurrently; the next stage waits for all of them."""

    name: str
    tasks: tuple[TaskSpec, ...]
    line: int | None = None


@dataclass(frozen=True)
class Options:
    """``[options]``: tasks in flight at once (``None``: no limit), where Spark runs, the
    tasks' default retries and timeout, and how long the driver's lease on a run lasts."""

    concurrency: int | None = None
    spark: SparkConfig = field(default_factory=SparkConfig)
    retry: Retry = field(default_factory=Retry)
    timeout: float | None = None
    lease: float = DEFAULT_LEASE


@dataclass(frozen=True)
class Pipeline:
    """A whole pipeline file after parameters were substituted; ``scheduled_for``: the time
    ``-p scheduled_for=`` gave a run of it (canonical ISO 8601), if any."""

    name: str
    stages: tuple[Stage, ...]
    options: Options = field(default_factory=Options)
    description: str = ""
    params: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))
    path: Path | None = None
    tasks: tuple[TaskSpec, ...] = ()
    schedule: Schedule | None = None
    scheduled_for: str | None = None
    source: str | None = None  # a Python pipeline's "FILE.py:ATTR" or "module:attr"

    @property
    def timezone(self) -> str:
        """The timezone its runs' ``scheduled_for`` is written in: its schedule's, or UTC."""
        return self.schedule.timezone if self.schedule is not None else "UTC"

    @property
    def task_count(self) -> int:
        """Number of tasks over all stages."""
        return len(self.dag)

    @property
    def dag(self) -> tuple[TaskSpec, ...]:
        """Every task with the tasks it comes after: ``tasks`` of a ``[[task]]`` file, or the
        stages' tasks named ``stage/task``, each after every task of the stage before."""
        if self.tasks or not self.stages:
            return self.tasks
        out: list[TaskSpec] = []
        before: tuple[str, ...] = ()
        for stage in self.stages:
            names = tuple(f"{stage.name}/{t.name}" for t in stage.tasks)
            out.extend(replace(t, name=n, after=before + tuple(f"{stage.name}/{a}"
                                                              for a in t.after))
                       for t, n in zip(stage.tasks, names, strict=True))
            before = names
        return tuple(out)

    @property
    def base_dir(self) -> Path:
        """The folder of the pipeline file: ``run`` puts it on ``sys.path`` for its modules."""
        return self.path.resolve().parent if self.path is not None else Path.cwd()
