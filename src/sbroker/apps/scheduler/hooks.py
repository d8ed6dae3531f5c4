"""What watches the executor run a task: the hooks it asks the broker's instrumentation for
(``broker.instrumentation.hooks(TaskHooks)``; tracing's are in apps/tracing).  These do
nothing."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext


class TaskScope:
    """One task's hooks, from :meth:`TaskHooks.task`."""

    def current(self) -> AbstractContextManager[object]:
        """Entered in the thread that runs the task's code, for as long as it runs (what the
        code does joins the task's trace)."""
        return nullcontext()

    def ended(self, status: str, error: str | None, job_ids: Iterable[int] = (),
              operation_ids: Iterable[str] = ()) -> None:
        """The task ended with ``status`` ("succeeded", "failed", ...), having started these
        Spark jobs (or Spark Connect operations)."""


NO_TASK = TaskScope()


class TaskHooks:
    """The executor's hooks."""

    def task(self, trace_context: str | None, log_id: int, kind: str) -> TaskScope:
        """A task (its ``ExecutionLog`` id and type: "sql", "python", ...) is about to run,
        for a message that carried ``trace_context``."""
        return NO_TASK


NO_HOOKS = TaskHooks()
