"""``StubRunner``: the runner of scheduler and pipeline tests, with no JVM.

Behaviour is scripted per task key (the SQL text of a ``SparkSQL``, the target of a
``PythonTask``): a value, an error, job ids, a progress report, and an optional gate — an
event the run waits on, so a test decides exactly when a task finishes. Unscripted Python
tasks are really called, with a ``spark`` that raises if touched; unscripted SQL succeeds
with ``None``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sbroker.apps.spark.runner import RunOutcome, SparkProgress
from sbroker.apps.spark.tasks import (
    JsonValue,
    PythonTask,
    SparkSQL,
    Task,
    TaskCancelled,
    TaskError,
    as_task,
    one_line_error,
    resolve_target,
    task_traceback,
)

__all__ = ["NoSpark", "StubBehaviour", "StubRunner", "task_key"]


def task_key(task: Task | str) -> str:
    """The key a ``StubRunner`` scripts a task by: SQL text or Python target."""
    task = as_task(task)
    return task.sql if isinstance(task, SparkSQL) else task.target


@dataclass
class StubBehaviour:
    """What a scripted task does; ``gate`` (if given) is waited on before finishing."""

    value: JsonValue = None
    error: BaseException | None = None
    spark_job_ids: Sequence[int] = ()
    progress: SparkProgress | None = None
    gate: threading.Event | None = None
    operation_ids: Sequence[str] = ()


class NoSpark:
    """The ``spark`` a stub passes to real Python tasks: touching it is a test failure."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"StubRunner has no Spark (the task used spark.{name})")


@dataclass
class _Run:
    log_id: int
    task: Task
    pool: str | None
    cancelled: threading.Event = field(default_factory=threading.Event)
    progress: SparkProgress | None = None


class StubRunner:
    """A thread-safe fake ``Runner``; records every call in ``calls`` and concurrency peaks."""

    def __init__(self, behaviours: dict[str, StubBehaviour] | None = None) -> None:
        self._lock = threading.Condition()
        self._behaviours: dict[str, StubBehaviour] = dict(behaviours or {})
        self._running: dict[int, _Run] = {}
        self._pre_cancelled: set[int] = set()
        self.calls: list[tuple[int, Task, str | None]] = []
        self.finished: list[int] = []
        self.max_running = 0
        self.closed = False

    def on(self, key: str, *, value: JsonValue = None, error: BaseException | None = None,
           spark_job_ids: Sequence[int] = (), progress: SparkProgress | None = None,
           gate: threading.Event | None = None,
           operation_ids: Sequence[str] = ()) -> StubBehaviour:
        """Script the task with this SQL text or Python target."""
        behaviour = StubBehaviour(value, error, spark_job_ids, progress, gate, operation_ids)
        with self._lock:
            self._behaviours[key] = behaviour
        return behaviour

    @property
    def running(self) -> list[int]:
        """Log ids running now."""
        with self._lock:
            return sorted(self._running)

    def wait_running(self, count: int, timeout: float = 10.0) -> list[int]:
        """Block until ``count`` tasks are running at once; returns their log ids."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self._running) >= count, timeout):
                raise TimeoutError(f"{len(self._running)} tasks running, wanted {count}")
            return sorted(self._running)

    def wait_started(self, log_id: int, timeout: float = 10.0) -> None:
        """Block until the task with this log id has started (or finished)."""
        with self._lock:
            if not self._lock.wait_for(
                lambda: log_id in self._running or log_id in self.finished, timeout
            ):
                raise TimeoutError(f"log id {log_id} did not start")

    def run(self, task: Task, *, log_id: int, pool: str | None = None) -> RunOutcome:
        """Run a task as scripted (see the module docstring)."""
        task = as_task(task)
        run = _Run(log_id, task, pool)
        with self._lock:
            self.calls.append((log_id, task, pool))
            behaviour = self._behaviours.get(task_key(task))
            if log_id in self._pre_cancelled:
                self._pre_cancelled.discard(log_id)
                run.cancelled.set()
            self._running[log_id] = run
            self.max_running = max(self.max_running, len(self._running))
            run.progress = behaviour.progress if behaviour else None
            self._lock.notify_all()
        try:
            return self._run(run, behaviour)
        finally:
            with self._lock:
                del self._running[log_id]
                self.finished.append(log_id)
                self._lock.notify_all()

    def _run(self, run: _Run, behaviour: StubBehaviour | None) -> RunOutcome:
        job_ids = list(behaviour.spark_job_ids) if behaviour else []
        if run.cancelled.is_set():
            raise TaskCancelled(run.log_id, "cancelled before it started")
        if behaviour is not None and behaviour.gate is not None:
            while not behaviour.gate.wait(0.01):
                if run.cancelled.is_set():
                    raise TaskCancelled(run.log_id, "cancelled", job_ids)
        value: JsonValue = behaviour.value if behaviour else None
        try:
            if behaviour is not None and behaviour.error is not None:
                raise behaviour.error
            if behaviour is None and isinstance(run.task, PythonTask):
                value = resolve_target(run.task.target)(NoSpark(), **run.task.kwargs)
        except Exception as exc:
            if run.cancelled.is_set():
                raise TaskCancelled(run.log_id, "cancelled", job_ids) from exc
            raise TaskError(run.log_id, one_line_error(exc), job_ids,
                            task_traceback(exc)) from exc
        if run.cancelled.is_set():
            raise TaskCancelled(run.log_id, "cancelled", job_ids)
        return RunOutcome(value, job_ids, list(behaviour.operation_ids) if behaviour else [])

    def cancel(self, log_id: int) -> bool:
        """Cancel a running task (its gate stops waiting) or one that has not started yet."""
        with self._lock:
            run = self._running.get(log_id)
            if run is None:
                self._pre_cancelled.add(log_id)
                return False
            run.cancelled.set()
            return True

    def progress(self, log_id: int) -> SparkProgress | None:
        """The scripted progress of a running task."""
        with self._lock:
            run = self._running.get(log_id)
            return run.progress if run else None

    def close(self) -> None:
        """Mark the stub closed (tests check that owners close their runner)."""
        self.closed = True
