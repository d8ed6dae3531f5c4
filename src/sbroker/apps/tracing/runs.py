"""The spans of a pipeline run (docs/tracing.md), made by a run listener: the run is a root
span, each task a child of it, each attempt a child of its task (current while the attempt
is sent, so the executor's spans join it), and the wait before a retry a
``pipeline.retry_delay`` span between two attempts.  Imported only once tracing is on and
the pipeline runner asks for its listener."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from opentelemetry.trace import Span, Tracer

from sbroker.apps.pipeline.listeners import RunListener
from sbroker.apps.pipeline.runstate import RunState, TaskState
from sbroker.apps.tracing.spans import current, end, start_span


class RunTrace:
    """The open spans of one pipeline run."""

    def __init__(self, tracer: Tracer, run_id: int, pipeline: str, *, resumed: bool) -> None:
        self.tracer = tracer
        self.run = start_span(tracer, "pipeline.run", None, {
            "sbroker.run.id": run_id, "sbroker.pipeline.name": pipeline,
            "sbroker.run.resumed": resumed}, root=True)
        self.tasks: dict[str, Span] = {}
        self.attempts: dict[int, Span] = {}  # log id -> open attempt span
        self.delays: dict[str, Span] = {}  # task -> open retry delay span

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


class RunSpans(RunListener):
    """A run listener that makes the run's spans, while the runner drives it."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self.trace: RunTrace | None = None
        self._sending: dict[str, Span] = {}  # task -> the span of the attempt being sent

    @contextlib.contextmanager
    def driving(self, run: RunState) -> Iterator[None]:
        trace = self.trace = RunTrace(self.tracer, run.run_id, run.pipeline.name,
                                      resumed=run.resumed)
        try:
            with current(trace.run):
                yield
        finally:
            trace.finish(run.status, {n: (t.status, t.error) for n, t in run.tasks.items()})
            self.trace = None

    @contextlib.contextmanager
    def sending(self, run: RunState, task: TaskState) -> Iterator[None]:
        if self.trace is None:
            yield
            return
        span = self._sending[task.name] = self.trace.start_attempt(task.name, task.attempts)
        with current(span):
            yield

    def task_started(self, run: RunState, task: TaskState) -> None:
        span = self._sending.pop(task.name, None)
        if self.trace is not None and span is not None and task.log_id is not None:
            self.trace.sent(span, task.log_id)

    def task_finished(self, run: RunState, task: TaskState) -> None:
        trace = self.trace
        if trace is None:
            return
        if task.ended is not None:
            trace.attempt_ended(task.name, task.ended.log_id, task.ended.status,
                                task.ended.error, task.ended.retry_in)
        if task.status.ended:
            trace.task_ended(task.name, task.status, task.error)
