"""The scheduler's task spans: the executor's hooks (``TaskHooks``) as OpenTelemetry's."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager

from opentelemetry import trace
from opentelemetry.trace import Span, Tracer

from sbroker.apps.scheduler.hooks import TaskHooks, TaskScope
from sbroker.apps.tracing.spans import SYSTEM, current, fail, span_context, under


class TaskSpans(TaskHooks):
    """A ``task`` span around each scheduler task."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    def task(self, trace_context: str | None, log_id: int, kind: str) -> TaskScope:
        """Under the current span (the executor's ``process``), else in the trace of the
        ``exec_async`` that sent it."""
        parent = None
        if not trace.get_current_span().get_span_context().is_valid:
            sc = span_context(trace_context)
            parent = under(sc) if sc is not None else None
        return _Task(self.tracer.start_span("task", context=parent, attributes={
            "messaging.system": SYSTEM, "sbroker.task.log_id": log_id,
            "sbroker.task.type": kind}))


class _Task(TaskScope):
    """A scheduler task's span."""

    def __init__(self, span: Span) -> None:
        self.span = span

    def current(self) -> AbstractContextManager[object]:
        return current(self.span)

    def ended(self, status: str, error: str | None, job_ids: Iterable[int] = (),
              operation_ids: Iterable[str] = ()) -> None:
        """The outcome, and one event per Spark job (or Spark Connect operation) the task
        started, carrying its id."""
        span = self.span
        for job in job_ids:
            span.add_event("spark.job", {"spark.job.id": int(job)})
        for op in operation_ids:
            span.add_event("spark.operation", {"spark.connect.operation_id": str(op)})
        span.set_attribute("sbroker.task.status", status)
        if status == "failed":
            fail(span, error or status)
        span.end()
