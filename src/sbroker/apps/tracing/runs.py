"""The spans of a pipeline run (docs/tracing.md): the run is a root span, each task a child
of it, each attempt a child of its task (current while the attempt is sent, so the
executor's spans join it), and the wait before a retry a ``pipeline.retry_delay`` span
between two attempts.  Imported only once tracing is on."""

from __future__ import annotations

from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, Tracer

from sbroker.apps.tracing.otel import SYSTEM, current


def start_span(tracer: Tracer, name: str, parent: Span | None, attributes: dict[str, Any],
               *, root: bool = False) -> Span:
    """An internal span under ``parent``, the current span, or none (``root``)."""
    ctx = trace.set_span_in_context(parent) if parent is not None else (
        otel_context.Context() if root else None)
    attrs: dict[str, Any] = {"messaging.system": SYSTEM}
    attrs.update((k, v) for k, v in attributes.items() if v is not None)
    return tracer.start_span(name, context=ctx, attributes=attrs)


def end(span: Span | None, *, error: str | None = None, **attributes: Any) -> None:
    """End ``span`` (None: nothing), with attributes and an error status when given."""
    if span is None:
        return
    for key, value in attributes.items():
        if value is not None:
            span.set_attribute(key, value)
    if error is not None:
        span.set_status(Status(StatusCode.ERROR, error))
    span.end()


class RunTrace:
    """The spans of one pipeline run."""

    def __init__(self, tracer: Tracer, run_id: int, pipeline: str, *, resumed: bool) -> None:
        self.tracer = tracer
        self.run = start_span(tracer, "pipeline.run", None, {
            "sbroker.run.id": run_id, "sbroker.pipeline.name": pipeline,
            "sbroker.run.resumed": resumed}, root=True)
        self.tasks: dict[str, Span] = {}
        self.attempts: dict[int, Span] = {}  # log id -> open attempt span
        self.delays: dict[str, Span] = {}  # task -> open retry delay span

    current = staticmethod(current)  # make a span current in this thread

    def start_attempt(self, task: str, attempt: int) -> Span:
        """An attempt of ``task`` is about to be sent: its span (make it current for the
        send, then give it the log id with :meth:`sent`)."""
        parent = self.tasks.get(task)
        if parent is None:
            parent = self.tasks[task] = start_span(self.tracer, "pipeline.task", self.run,
                                                   {"sbroker.task.name": task})
        end(self.delays.pop(task, None))
        return start_span(self.tracer, "pipeline.attempt", parent,
                          {"sbroker.task.name": task, "sbroker.task.attempt": attempt})

    def sent(self, span: Span, log_id: int) -> None:
        span.set_attribute("sbroker.task.log_id", log_id)
        self.attempts[log_id] = span

    def attempt_ended(self, task: str, log_id: int, status: str, error: str | None,
                      retry_in: float | None) -> None:
        """An attempt's outcome was recorded; ``retry_in``: seconds until the next one."""
        end(self.attempts.pop(log_id, None), error=None if status == "succeeded" else error,
            **{"sbroker.task.status": status})
        if retry_in is not None and task in self.tasks:
            self.delays[task] = start_span(self.tracer, "pipeline.retry_delay",
                                           self.tasks[task],
                                           {"sbroker.retry.delay_seconds": retry_in})

    def task_ended(self, task: str, status: str, error: str | None) -> None:
        """``task`` ended for good (a task skipped without an attempt gets its span now)."""
        end(self.delays.pop(task, None))
        span = self.tasks.pop(task, None)
        if span is None:
            span = start_span(self.tracer, "pipeline.task", self.run,
                              {"sbroker.task.name": task})
        end(span, error=error if status in ("failed", "cancelled") else None,
            **{"sbroker.task.status": status})

    def finish(self, status: str, tasks: dict[str, tuple[str, str | None]]) -> None:
        """The run ended with ``status``: every span still open ends (``tasks``: each
        task's (status, error))."""
        for span in self.attempts.values():
            end(span)
        self.attempts.clear()
        for name in list(self.tasks) + [t for t in self.delays if t not in self.tasks]:
            self.task_ended(name, *tasks.get(name, ("unknown", None)))
        end(self.run, error=None if status == "succeeded" else status,
            **{"sbroker.run.status": status})
