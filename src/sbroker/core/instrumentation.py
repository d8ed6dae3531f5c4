"""The hooks cross-cutting concerns (tracing, metrics) watch a broker by.

A broker is given one :class:`Instrumentation` when it opens (``Broker.open(...,
instrumentation=)``; OpenTelemetry's by itself when the application set a tracer provider:
docs/tracing.md) and hands it down: the engine calls it at each SEND and RECEIVE, the
activation service around each activated procedure, the scheduler's executor around each
task.  This class is the default and does nothing; an implementation overrides the hooks it
needs, in the manner of dramatiq's middleware.  A hook must not touch the database and must
not raise: it runs inside the statement it watches.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext

from sbroker.core.messages import Message


class TaskScope:
    """One scheduler task's hooks, from :meth:`Instrumentation.task`: these do nothing."""

    def current(self) -> AbstractContextManager[object]:
        """Entered in the thread that runs the task's code, for as long as it runs (what the
        code does joins the task's trace)."""
        return nullcontext()

    def ended(self, status: str, error: str | None, job_ids: Iterable[int] = (),
              operation_ids: Iterable[str] = ()) -> None:
        """The task ended with ``status`` ("succeeded", "failed", ...), having started these
        Spark jobs (or Spark Connect operations)."""


NO_TASK = TaskScope()


class Instrumentation:
    """Every hook of a broker; here each does nothing (the broker's default)."""

    def send(self, message_type: str, far_service: str, conversation_id: str,
             group_id: str, handles: Sequence[str]) -> str | None:
        """A SEND statement on ``handles`` (the first one's conversation, group and far
        service given): the trace context its messages carry (a W3C ``traceparent``,
        ``msg.trace_context`` on the other side), or None."""
        return None

    def before_receive(self, queue: str) -> object:
        """A RECEIVE on ``queue`` starts; what it returns is given to :meth:`after_receive`."""
        return None

    def after_receive(self, queue: str, messages: Sequence[Message], before: object) -> None:
        """The RECEIVE returned ``messages`` (not called when it returned none)."""

    def before_procedure(self, queue: str) -> None:
        """An activated procedure of ``queue`` starts, in this thread."""

    def after_procedure(self, queue: str, error: BaseException | None) -> None:
        """The activated procedure returned (``error``: what it raised)."""

    def task(self, trace_context: str | None, log_id: int, kind: str) -> TaskScope:
        """A scheduler task (its ``ExecutionLog`` id and type: "sql", "python", ...) is about
        to run, for a message that carried ``trace_context``."""
        return NO_TASK


NO_INSTRUMENTATION = Instrumentation()
