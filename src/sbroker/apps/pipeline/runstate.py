"""The state of a durable run as the runner holds it (mirrors the rows of ``PipelineRuns``
and ``PipelineRunTasks``), the listener that hears of its changes, and the DAG rules that do
not touch the database: which tasks may start, which must be skipped."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sbroker.apps.pipeline.model import Pipeline, TaskSpec

__all__ = ["DONE", "RunListener", "RunState", "TaskState", "dependants"]

DONE = frozenset({"succeeded", "failed", "skipped", "cancelled"})


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


@dataclass
class TaskState:
    """One task of a run: the row of ``PipelineRunTasks`` plus its open attempt."""

    spec: TaskSpec
    status: str = "pending"
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
    timed_out: bool = False
    kept: bool = False  # succeeded before this process resumed the run
    started_at: float | None = None  # monotonic, for the display
    finished_at: float | None = None

    @property
    def name(self) -> str:
        """The task's name."""
        return self.spec.name

    def row(self, run_id: int) -> tuple[Any, ...]:
        """Parameters of ``set_task``."""
        return (self.status, self.attempts, self.failures, self.next_attempt, self.start_time,
                self.end_time, json.dumps(self.value), self.error, run_id, self.name)

    @property
    def seconds(self) -> float | None:
        """Time from its first start in this process to its end."""
        if self.started_at is None:
            return None
        return (self.finished_at or time.monotonic()) - self.started_at


@dataclass
class RunState:
    """A run being driven: its id, dialog, tasks in file order and how it ended."""

    run_id: int
    pipeline: Pipeline
    handle: str | None
    tasks: dict[str, TaskState]
    status: str = "running"
    resumed: bool = False
    interrupted: bool = False
    started_at: float = field(default_factory=time.monotonic)
    finished_at: float | None = None
    scheduled_for: str | None = None  # ISO time: the run's start (docs/pipelines.md)

    @property
    def ok(self) -> bool:
        """True once every task succeeded."""
        return self.status == "succeeded"

    @property
    def done(self) -> bool:
        """Every task ended and no attempt is open."""
        return all(t.status in DONE and t.log_id is None for t in self.tasks.values())

    @property
    def seconds(self) -> float:
        """Wall-clock time of this process's part of the run."""
        return (self.finished_at or time.monotonic()) - self.started_at

    def ready(self, now: float) -> list[TaskState]:
        """Tasks that may start now: pending with every ``after`` task succeeded, or
        retrying and due; in file order."""
        succeeded = {n for n, t in self.tasks.items() if t.status == "succeeded"}
        out = []
        for t in self.tasks.values():
            waited = (t.status == "pending" and t.spec.map is None  # mapped: expanded
                      and succeeded.issuperset(t.spec.after))
            if waited or (t.status == "retrying" and (t.next_attempt or 0.0) <= now):
                out.append(t)
        return out

    def running(self) -> int:
        """Attempts in flight."""
        return sum(1 for t in self.tasks.values() if t.log_id is not None)

    def skip_after_failures(self, end_time: str) -> list[TaskState]:
        """Mark ``skipped`` every pending task after a task that ended without succeeding;
        the tasks marked."""
        marked: list[TaskState] = []
        frontier = {n for n, t in self.tasks.items()
                    if t.status in ("failed", "skipped", "cancelled")}
        while frontier:  # then the tasks after those just skipped, and so on
            new = [t for t in self.tasks.values()
                   if t.status == "pending" and not frontier.isdisjoint(t.spec.after)]
            for t in new:
                t.status, t.end_time = "skipped", end_time
            marked += new
            frontier = {t.name for t in new}
        return marked


class RunListener:
    """Hooks the runner calls after each commit; the default does nothing."""

    def run_started(self, run: RunState) -> None:
        """The run is recorded (new or resumed)."""

    def task_started(self, run: RunState, task: TaskState) -> None:
        """An attempt of ``task`` was sent."""

    def task_finished(self, run: RunState, task: TaskState) -> None:
        """An attempt ended: the task succeeded, failed, is retrying, or was skipped."""

    def run_finished(self, run: RunState) -> None:
        """The run ended (or was interrupted)."""
