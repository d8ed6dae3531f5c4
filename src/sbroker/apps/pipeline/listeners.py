"""What watches a run: the runner tells :class:`RunListener` objects what it committed and
knows nothing of terminals, traces or pages.  The terminal display (rundisplay.py), the run's
trace (:class:`TraceListener`) and tests are listeners; :class:`Listeners` tells several."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, nullcontext
from typing import Any

from sbroker.apps.pipeline.runstate import RunState, TaskState
from sbroker.core import tracing

__all__ = ["Listeners", "RunListener", "TraceListener", "listeners_for"]


class RunListener:
    """Hooks the runner calls after each commit; the default does nothing."""

    def run_started(self, run: RunState) -> None:
        """The run is recorded (new), or taken up (resumed, taken over)."""

    def driving(self, run: RunState) -> AbstractContextManager[None]:
        """Entered around the whole drive of the run (a trace's run span is current)."""
        return nullcontext()

    def sending(self, run: RunState, task: TaskState) -> AbstractContextManager[None]:
        """Entered while an attempt of ``task`` is sent (``task.attempts`` counts it)."""
        return nullcontext()

    def task_started(self, run: RunState, task: TaskState) -> None:
        """An attempt of ``task`` was sent (``task.log_id`` is its ExecutionLog row)."""

    def task_finished(self, run: RunState, task: TaskState) -> None:
        """An attempt ended (``task.ended`` says how: the task succeeded, failed, is retrying,
        was cancelled), or the task was skipped (``task.ended`` is None)."""

    def run_finished(self, run: RunState) -> None:
        """The run ended, or this process stopped driving it (interrupted, handed back,
        taken over by another)."""


class Listeners(RunListener):
    """Several listeners told in turn."""

    def __init__(self, *listeners: RunListener) -> None:
        self.listeners = listeners

    def run_started(self, run: RunState) -> None:
        for listener in self.listeners:
            listener.run_started(run)

    @contextlib.contextmanager
    def driving(self, run: RunState) -> Iterator[None]:
        with ExitStack() as stack:
            for listener in self.listeners:
                stack.enter_context(listener.driving(run))
            yield

    @contextlib.contextmanager
    def sending(self, run: RunState, task: TaskState) -> Iterator[None]:
        with ExitStack() as stack:
            for listener in self.listeners:
                stack.enter_context(listener.sending(run, task))
            yield

    def task_started(self, run: RunState, task: TaskState) -> None:
        for listener in self.listeners:
            listener.task_started(run, task)

    def task_finished(self, run: RunState, task: TaskState) -> None:
        for listener in self.listeners:
            listener.task_finished(run, task)

    def run_finished(self, run: RunState) -> None:
        for listener in self.listeners:
            listener.run_finished(run)


class TraceListener(RunListener):
    """The run as one trace (docs/tracing.md): the run a root span, each task a child, each
    attempt a child of its task, current while it is sent so that the executor's spans join
    it.  Used only while tracing is on."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer
        self.trace: tracing.RunTrace | None = None
        self._sending: dict[str, Any] = {}  # task -> the span of the attempt being sent

    @contextlib.contextmanager
    def driving(self, run: RunState) -> Iterator[None]:
        trace = self.trace = tracing.RunTrace(self.tracer, run.run_id, run.pipeline.name,
                                              resumed=run.resumed)
        try:
            with tracing.current(trace.run):
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
        with tracing.current(span):
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


def listeners_for(listener: RunListener | None) -> RunListener:
    """``listener`` and, while tracing is on, the run's trace."""
    tracer = tracing.TRACER
    if tracer is None:
        return listener or RunListener()
    trace = TraceListener(tracer)
    return trace if listener is None else Listeners(trace, listener)
