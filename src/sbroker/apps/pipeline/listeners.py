"""What watches a run: the runner tells :class:`RunListener` objects what it committed and
knows nothing of terminals, traces or pages.  The terminal display (rundisplay.py), the run's
trace (the broker's instrumentation gives it: apps/tracing) and tests are listeners;
:class:`Listeners` tells several."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, nullcontext

from sbroker.apps.pipeline.runstate import RunState, TaskState
from sbroker.core.instrumentation import Instrumentation

__all__ = ["Listeners", "RunListener", "listeners_for"]


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


def listeners_for(listener: RunListener | None,
                  instrumentation: Instrumentation) -> RunListener:
    """``listener`` and the run listener the broker's instrumentation has, if any (tracing's:
    the run as one trace, docs/tracing.md)."""
    watching = instrumentation.hooks(RunListener)
    if watching is None:
        return listener or RunListener()
    return watching if listener is None else Listeners(watching, listener)
