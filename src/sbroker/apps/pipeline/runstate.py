"""The state of a durable run as its driver holds it (mirrors the rows of ``PipelineRuns`` and
``PipelineRunTasks``), and the DAG rules that do not touch the database: which tasks may
start, which must be skipped."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sbroker.apps.pipeline.model import Pipeline, RunStatus, TaskSpec, TaskStatus

__all__ = ["AttemptEnd", "Lease", "RunState", "TaskState", "dependants", "task_from_row"]
# The members the hot loops compare with, looked up once (an enum member's lookup through
# its class costs several times a comparison: the runner checks every task at every step).
_PENDING, _RETRYING, _SUCCEEDED = TaskStatus.PENDING, TaskStatus.RETRYING, TaskStatus.SUCCEEDED
_ENDED = frozenset(s for s in TaskStatus if s.ended)
_NOT_SUCCEEDED = frozenset({TaskStatus.FAILED, TaskStatus.SKIPPED, TaskStatus.CANCELLED})


def dependants(tasks: Iterable[TaskSpec], names: set[str]) -> set[str]:
    """``names`` and every task that comes after one of them, directly or not."""
    after = {t.name: t.after for t in tasks}
    out = set(names)
    grew = True
    while grew:
        grew = False
        for name, deps in after.items():
            if name not in out and any(d in out for d in deps):
                out.add(name)
                grew = True
    return out


@dataclass(frozen=True)
class Lease:
    """The lease a driver holds on run ``run_id``: its fencing ``token`` (each new driver's
    is one more) and how long it lasts unless renewed."""

    run_id: int
    token: int
    seconds: float


@dataclass(frozen=True)
class AttemptEnd:
    """The attempt whose end a listener hears of: its log id, outcome, error, and the
    seconds until the task's next attempt (None: no retry)."""

    log_id: int
    status: str
    error: str | None
    retry_in: float | None = None


@dataclass
class TaskState:
    """One task of a run: the row of ``PipelineRunTasks`` plus its open attempt."""

    spec: TaskSpec
    status: TaskStatus = TaskStatus.PENDING
    attempts: int = 0
    failures: int = 0  # failed attempts since the run (or its resume) began: the retry count
    next_attempt: float | None = None  # epoch seconds, while retrying
    start_time: str | None = None
    end_time: str | None = None
    value: Any = None
    error: str | None = None
    log_id: int | None = None  # the open attempt
    last_log_id: int | None = None  # the latest attempt's, for the report
    details: str | None = None  # the latest failed attempt's traceback
    deadline: float | None = None  # when the open attempt times out
    kept: bool = False  # succeeded before this process took the run up
    ended: AttemptEnd | None = None  # the attempt that just ended (None: skipped)
    started_at: float | None = None  # monotonic, for the display
    finished_at: float | None = None

    @property
    def name(self) -> str:
        """The task's name."""
        return self.spec.name

    def row(self, run_id: int) -> tuple[Any, ...]:
        """Parameters of ``set_task``."""
        return (self.status.value, self.attempts, self.failures, self.next_attempt,
                self.start_time, self.end_time, json.dumps(self.value), self.error, run_id,
                self.name)

    @property
    def seconds(self) -> float | None:
        """Time from its first start in this process to its end."""
        if self.started_at is None:
            return None
        return (self.finished_at or time.monotonic()) - self.started_at


@dataclass
class RunState:
    """A run being driven: its id, dialog, lease, tasks in file order and how it ended."""

    run_id: int
    pipeline: Pipeline
    handle: str | None
    tasks: dict[str, TaskState]
    status: RunStatus = RunStatus.RUNNING
    resumed: bool = False
    interrupted: bool = False  # Ctrl-C or SIGTERM of the driving process
    lease: Lease | None = None
    lost: bool = False  # another driver took the run over: this one let it go
    handed_back: bool = False  # the driving server stopped: the run is left for another
    cancel_requested: bool = False  # `sbroker runs cancel` asked (heard at a fence)
    takeover: bool = False  # taken over from another driver (a server's takeover)
    schedule: str | None = None  # the schedule that started it, if one did
    scheduled_for: str | None = None  # the time it is for (docs/pipelines.md): ISO 8601
    started_at: float = field(default_factory=time.monotonic)
    finished_at: float | None = None

    @property
    def ok(self) -> bool:
        """True once every task succeeded."""
        return self.status == RunStatus.SUCCEEDED

    @property
    def done(self) -> bool:
        """Every task ended and no attempt is open."""
        return all(t.status in _ENDED and t.log_id is None for t in self.tasks.values())

    @property
    def seconds(self) -> float:
        """Wall-clock time of this process's part of the run."""
        return (self.finished_at or time.monotonic()) - self.started_at

    def ready(self, now: float) -> list[TaskState]:
        """Tasks that may start now: pending with every ``after`` task succeeded, or
        retrying and due; in file order."""
        succeeded = {n for n, t in self.tasks.items() if t.status == _SUCCEEDED}
        out = []
        for t in self.tasks.values():
            status = t.status
            if (status == _PENDING and t.spec.map is None  # a mapped task is expanded
                    and succeeded.issuperset(t.spec.after)) or (
                    status == _RETRYING and (t.next_attempt or 0.0) <= now):
                out.append(t)
        return out

    def running(self) -> int:
        """Attempts in flight."""
        return sum(1 for t in self.tasks.values() if t.log_id is not None)

    def skip_after_failures(self, end_time: str) -> list[TaskState]:
        """Mark ``skipped`` every pending task after a task that ended without succeeding;
        the tasks marked."""
        marked: list[TaskState] = []
        frontier = {n for n, t in self.tasks.items() if t.status in _NOT_SUCCEEDED}
        while frontier:  # then the tasks after those just skipped, and so on
            new = [t for t in self.tasks.values()
                   if t.status == _PENDING and not frontier.isdisjoint(t.spec.after)]
            for t in new:
                t.status, t.end_time, t.ended = TaskStatus.SKIPPED, end_time, None
            marked += new
            frontier = {t.name for t in new}
        return marked


def task_from_row(spec: TaskSpec, row: dict[str, Any]) -> TaskState:
    """A task of a run as its ``PipelineRunTasks`` row (by column name) recorded it."""
    status = TaskStatus(row["status"])
    return TaskState(spec, status, int(row["attempts"]), int(row["failures"]),
                     row["next_attempt"], row["start_time"], row["end_time"],
                     json.loads(row["value"]) if row["value"] else None, row["error"],
                     kept=status == TaskStatus.SUCCEEDED)
