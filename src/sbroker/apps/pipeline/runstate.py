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
_WATCHED = frozenset({"status", "log_id"})  # what a run's index (_Index) follows


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
    _index: _Index | None = field(default=None, init=False, repr=False, compare=False)

    def __setattr__(self, name: str, value: Any) -> None:
        """A change of ``status`` or ``log_id`` is told to the index of the run that holds
        the task, wherever it is made."""
        index = self.__dict__.get("_index") if name in _WATCHED else None
        if index is None:
            object.__setattr__(self, name, value)
            return
        old = self.__dict__[name]
        object.__setattr__(self, name, value)
        if old != value:
            index.moved(self, name, old)

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


class _Index:
    """What the runner asks of a run at every wake-up (docs/design.md, "Pipeline runs
    and their drivers"), kept up to date as its tasks change (each tells it of a new ``status`` or
    ``log_id``) rather than found by a pass over every task: a run of n tasks costs O(n) of
    this bookkeeping in all, not O(n) per wake-up.  Built from ``tasks`` as they are;
    built anew when tasks are added (a mapped task's instances)."""

    def __init__(self, tasks: dict[str, TaskState]) -> None:
        self.tasks, self.size = tasks, len(tasks)
        self.position = {name: i for i, name in enumerate(tasks)}  # file order
        self.succeeded = {n for n, t in tasks.items() if t.status == _SUCCEEDED}
        self.after: dict[str, list[TaskState]] = {}  # a name: the tasks after it
        self.unmet: dict[str, int] = {}  # a task's name: its ``after`` not succeeded
        self.free: set[str] = set()  # pending, not mapped, every ``after`` succeeded
        self.retrying: dict[str, TaskState] = {}
        self.open: dict[int, TaskState] = {}  # by the log id of its open attempt
        self.unfinished: set[str] = set()  # not ended, or an attempt still open
        self.failed: set[str] = set()  # ended without succeeding
        for task in tasks.values():
            deps = set(task.spec.after)
            self.unmet[task.name] = len(deps - self.succeeded)
            for name in deps:
                self.after.setdefault(name, []).append(task)
            if task.log_id is not None:
                self.open[task.log_id] = task
            self.place(task)
            object.__setattr__(task, "_index", self)

    def stale(self, tasks: dict[str, TaskState]) -> bool:
        """Whether ``tasks`` is no longer what this was built from (tasks are only added)."""
        return tasks is not self.tasks or len(tasks) != self.size

    def order(self, task: TaskState) -> int:
        """The task's place in file order (sort key)."""
        return self.position[task.name]

    def moved(self, task: TaskState, field_name: str, old: Any) -> None:
        """``task``'s ``status`` or ``log_id`` was ``old``, and changed."""
        if field_name == "log_id":
            if old is not None and self.open.get(old) is task:
                del self.open[old]
            if task.log_id is not None:
                self.open[task.log_id] = task
        elif (old == _SUCCEEDED) != (task.status == _SUCCEEDED):
            now = task.status == _SUCCEEDED
            (self.succeeded.add if now else self.succeeded.discard)(task.name)
            for after in self.after.get(task.name, ()):
                self.unmet[after.name] += -1 if now else 1
                self.place(after)
        self.place(task)

    def place(self, task: TaskState) -> None:
        """``task`` in the sets its status and open attempt put it in, out of the rest."""
        name, status = task.name, task.status
        _put(self.free, name, status == _PENDING and task.spec.map is None
             and not self.unmet.get(name, 1))
        if status == _RETRYING:
            self.retrying[name] = task
        else:
            self.retrying.pop(name, None)
        _put(self.unfinished, name, status not in _ENDED or task.log_id is not None)
        _put(self.failed, name, status in _NOT_SUCCEEDED)


def _put(names: set[str], name: str, member: bool) -> None:
    if member:
        names.add(name)
    else:
        names.discard(name)


@dataclass
class RunState:
    """A run being driven: its id, dialog, lease, tasks in file order and how it ended."""

    run_id: int
    pipeline: Pipeline
    handle: str | None
    tasks: dict[str, TaskState]  # in file order; added to, never taken out of nor replaced
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
    _indexed: _Index | None = field(default=None, init=False, repr=False, compare=False)

    def _index(self) -> _Index:
        index = self._indexed
        if index is None or index.stale(self.tasks):
            index = self._indexed = _Index(self.tasks)
        return index

    @property
    def ok(self) -> bool:
        """True once every task succeeded."""
        return self.status == RunStatus.SUCCEEDED

    @property
    def done(self) -> bool:
        """Every task ended and no attempt is open."""
        return not self._index().unfinished

    @property
    def seconds(self) -> float:
        """Wall-clock time of this process's part of the run."""
        return (self.finished_at or time.monotonic()) - self.started_at

    def ready(self, now: float) -> list[TaskState]:
        """Tasks that may start now: pending with every ``after`` task succeeded (a mapped
        task is expanded instead), or retrying and due; in file order."""
        index = self._index()
        out = [self.tasks[name] for name in index.free]
        out += [t for t in index.retrying.values() if (t.next_attempt or 0.0) <= now]
        return self.in_order(out)

    def in_order(self, tasks: list[TaskState]) -> list[TaskState]:
        """``tasks`` (of this run) in file order."""
        if len(tasks) > 1:
            tasks.sort(key=self._index().order)
        return tasks

    def running(self) -> int:
        """Attempts in flight."""
        return len(self._index().open)

    def attempt(self, log_id: int) -> TaskState | None:
        """The task whose open attempt is ``log_id``."""
        return self._index().open.get(log_id)

    def open_attempts(self) -> list[TaskState]:
        """The tasks with an attempt open, in no particular order."""
        return list(self._index().open.values())

    def retrying(self) -> list[TaskState]:
        """The tasks waiting for their next attempt, in no particular order."""
        return list(self._index().retrying.values())

    def skip_after_failures(self, end_time: str) -> list[TaskState]:
        """Mark ``skipped`` every pending task after a task that ended without succeeding;
        the tasks marked."""
        index = self._index()
        marked: list[TaskState] = []
        frontier = set(index.failed)
        while frontier:  # then the tasks after those just skipped, and so on
            new = {t.name: t for name in frontier for t in index.after.get(name, ())
                   if t.status == _PENDING}
            for t in self.in_order(list(new.values())):
                t.status, t.end_time, t.ended = TaskStatus.SKIPPED, end_time, None
                marked.append(t)
            frontier = set(new)
        return marked


def task_from_row(spec: TaskSpec, row: dict[str, Any]) -> TaskState:
    """A task of a run as its ``PipelineRunTasks`` row (by column name) recorded it."""
    status = TaskStatus(row["status"])
    return TaskState(spec, status, int(row["attempts"]), int(row["failures"]),
                     row["next_attempt"], row["start_time"], row["end_time"],
                     json.loads(row["value"]) if row["value"] else None, row["error"],
                     kept=status == TaskStatus.SUCCEEDED)
