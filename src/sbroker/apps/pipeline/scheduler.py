"""What a pipeline run needs from a scheduler, and an in-process one without a broker.

``broker.scheduler()`` (SPEC §8) satisfies ``Scheduler``; ``LocalScheduler`` has the same
semantics on a thread pool, for tests and for running a pipeline file with no database.
A scheduler may also be a ``TaskMonitor`` (when a task started, its Spark progress); the live
display uses that when it is there.
"""

from __future__ import annotations

import datetime as dt
import itertools
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Protocol, runtime_checkable

from sbroker.apps.spark.runner import Runner, SparkProgress, execute
from sbroker.apps.spark.tasks import (
    Task,
    TaskFailed,
    TaskResult,
    as_task,
)

__all__ = ["LocalScheduler", "Scheduler", "TaskMonitor"]

_log_ids = itertools.count(1)  # unique per process: schedulers may share one runner


@runtime_checkable
class Scheduler(Protocol):
    """The part of ``broker.scheduler()`` a pipeline run uses."""

    def exec_async(self, task: Task | str) -> int:
        """Send a task; returns its log id."""
        ...

    def synchronize(self, timeout: float | None = None) -> TaskResult:
        """Wait for the next task to finish (``TimeoutError`` after ``timeout`` seconds)."""
        ...

    def cancel(self, log_id: int) -> None:
        """Cancel a queued or running task; its result comes back as ``cancelled``."""
        ...


@runtime_checkable
class TaskMonitor(Protocol):
    """Optional live information about sent tasks, for the progress display."""

    def started_at(self, log_id: int) -> dt.datetime | None:
        """When the task started running, ``None`` while it is queued."""
        ...

    def progress(self, log_id: int) -> SparkProgress | None:
        """The Spark task progress of a running task, if Spark reports it."""
        ...


class LocalScheduler:
    """``Scheduler`` and ``TaskMonitor`` on a thread pool of ``max_concurrency`` threads."""

    def __init__(self, runner: Runner, *, max_concurrency: int | None = None,
                 pool: str | None = None,
                 now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)) -> None:
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self.runner = runner
        self.pool = pool
        self._now = now
        self._executor = ThreadPoolExecutor(max_workers=max_concurrency or 64,
                                            thread_name_prefix="sbroker-local")
        self._lock = threading.Lock()
        self._done: queue.Queue[TaskResult] = queue.Queue()
        self._futures: dict[int, Future[None]] = {}
        self._started: dict[int, dt.datetime] = {}
        self._cancelled: set[int] = set()
        self._outstanding = 0
        self._collected: list[TaskResult] = []

    def exec_async(self, task: Task | str) -> int:
        """Queue a task; it runs as soon as a thread is free."""
        task = as_task(task)
        log_id = next(_log_ids)
        with self._lock:
            self._outstanding += 1
            self._futures[log_id] = self._executor.submit(self._run, log_id, task)
        return log_id

    def _run(self, log_id: int, task: Task) -> None:
        with self._lock:
            if log_id in self._cancelled:
                now = self._now()
                self._done.put(TaskResult(log_id, "cancelled", "cancelled before it started",
                                          now, now))
                return
            self._started[log_id] = self._now()
        try:
            result = execute(self.runner, task, log_id=log_id, pool=self.pool,
                             now=self._now).result()
        except BaseException as exc:  # never lose the "AsyncDone" of a task
            now = self._now()
            result = TaskResult(log_id, "failed", f"{type(exc).__name__}: {exc}", now, now)
        self._done.put(result)

    def synchronize(self, timeout: float | None = None) -> TaskResult:
        """The next finished task's result, in completion order."""
        with self._lock:
            if self._outstanding == 0:
                raise RuntimeError("synchronize() with no task outstanding would wait forever")
        try:
            result = self._done.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no task finished within {timeout} s") from None
        with self._lock:
            self._outstanding -= 1
            self._futures.pop(result.log_id, None)
            self._started.pop(result.log_id, None)
            self._cancelled.discard(result.log_id)
        self._collected.append(result)
        return result

    def wait_all(self, timeout: float | None = None) -> list[TaskResult]:
        """Results of every task sent since the last ``wait_all``; ``TaskFailed`` if any failed,
        ``TimeoutError`` when they are not all in after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                if self._outstanding == 0:
                    break
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            self.synchronize(left)
        results, self._collected = self._collected, []
        if any(not r.ok for r in results):
            raise TaskFailed(results)
        return results

    def cancel(self, log_id: int) -> None:
        """Cancel a queued task (it never runs) or a running one (through the runner)."""
        with self._lock:
            if log_id not in self._futures:
                return
            self._cancelled.add(log_id)
            running = log_id in self._started
        if running:
            self.runner.cancel(log_id)

    def started_at(self, log_id: int) -> dt.datetime | None:
        """When the task started, ``None`` while queued or once collected."""
        with self._lock:
            return self._started.get(log_id)

    def progress(self, log_id: int) -> SparkProgress | None:
        """The runner's Spark progress for a running task."""
        return self.runner.progress(log_id)

    def close(self) -> None:
        """Cancel what is queued and wait for running tasks to end."""
        with self._lock:
            self._cancelled.update(self._futures)
            running = [i for i in self._futures if i in self._started]
        for log_id in running:
            self.runner.cancel(log_id)
        self._executor.shutdown(wait=True, cancel_futures=False)

    def __enter__(self) -> LocalScheduler:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
