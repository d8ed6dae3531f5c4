"""Attempts that stop whether or not their code cooperates (docs/design.md, "Stopping a
task").

Each executor reader runs its tasks on an attempt thread of its own and waits for it with the
task's deadline, its cancel request and the broker's stop in view.  To stop an attempt the
reader cancels its Spark jobs, raises ``TaskStopped`` in its thread (a Python task only) and
gives it ``grace`` seconds; a thread still busy then (blocked in a C call: a sleep, a socket
read) is abandoned: the reader records the outcome and goes on with a new thread, and what the
old one returns later is dropped.  A thread that ran a stopped attempt is never used again.

The attempt thread only takes plain ``threading.Lock``s of this module (``with`` on a C lock
cannot be cut between the acquire and the block by an asynchronous exception, as a
``Condition``'s Python ``__enter__`` can), and the reader's waits are all bounded and look at
the state again, so an exception landing anywhere cannot leave the reader waiting for good.
"""

from __future__ import annotations

import ctypes
import enum
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["GRACE", "POLL", "STOP_DRAIN", "Attempt", "AttemptThread", "Reader", "Stop",
           "TaskStopped", "code_traceback"]

T = TypeVar("T")

#: Seconds a stopped attempt gets to end after its Spark jobs were cancelled and
#: ``TaskStopped`` was raised in it, before its thread is abandoned (a cancelled Spark job
#: returns its call in 0.1-0.6 s once the session is warm).
GRACE = 1.0
#: Seconds a running attempt gets to end by itself once the broker is stopping.
STOP_DRAIN = 5.0
#: A reader waiting for an attempt looks at ``stopping`` at least this often.
POLL = 0.25


class TaskStopped(BaseException):
    """Raised in the thread of an attempt that was cancelled or timed out.  Like
    ``KeyboardInterrupt`` it is a ``BaseException``: ``except Exception`` in a task does not
    swallow it, ``finally`` blocks and ``with`` exits run."""


class Stop(enum.Enum):
    """Why an attempt was stopped."""

    CANCELLED = "cancelled"
    TIMED_OUT = "timed out"
    STOPPING = "the executor stopped"


_SBROKER = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _theirs(frames: traceback.StackSummary) -> list[traceback.FrameSummary]:
    """The frames from the task's own code on: the attempt thread's and the runner's, which
    come first, are left out."""
    lead = 0
    for frame in frames:
        if frame.filename != threading.__file__ and not frame.filename.startswith(
                _SBROKER + os.sep):
            break
        lead += 1
    return list(frames)[lead:] or list(frames)


def code_traceback(exc: BaseException) -> str:
    """The traceback of what ended an attempt's work (``TaskStopped``: where its code was
    when it was stopped), from the task's code on."""
    frames = _theirs(traceback.extract_tb(exc.__traceback__))
    return ("Traceback (most recent call last):\n" + "".join(traceback.format_list(frames))
            + "".join(traceback.format_exception_only(type(exc), exc)))


def _async_raise(thread_id: int, exc: type[BaseException] | None) -> None:
    """Raise ``exc`` in the thread (at its next Python instruction); None clears one
    that has not landed yet."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               ctypes.py_object(exc) if exc else None)


class Attempt(Generic[T]):
    """One run of a task: ``work`` runs on an attempt thread, a reader waits for it."""

    def __init__(self, log_id: int, work: Callable[[], T], *, interruptible: bool = True,
                 timeout: float | None = None) -> None:
        self.log_id = log_id
        self.work = work
        self.interruptible = interruptible  # False: stop its Spark jobs only (a SparkSQL)
        self.timeout = timeout
        self.result: T | None = None
        self.raised: BaseException | None = None  # what ``work`` raised (TaskStopped...)
        self.done = False
        self.why: Stop | None = None  # set once, by the first stop
        self.abandoned = False  # the reader walked away before it ended
        self.where: str | None = None  # the stack it was stuck in when abandoned
        self.began: float | None = None  # time.monotonic() when the work began
        self.ended: float | None = None
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._thread: int | None = None  # while the work runs
        self._interrupted = False

    # -- any thread --------------------------------------------------------------------------
    def stop(self, why: Stop) -> bool:
        """Ask for the attempt to stop; False when it ended or was asked already."""
        with self._lock:
            if self.done or self.why is not None:
                return False
            self.why = why
            self._changed.notify_all()
            return True

    @property
    def stopped(self) -> bool:
        """True once a stop was asked before the attempt ended."""
        return self.why is not None

    # -- the attempt thread ------------------------------------------------------------------
    def run(self) -> None:
        """Do the work in the calling thread (an attempt thread, once)."""
        try:
            with self._lock:
                if self.why is None:
                    self._thread = threading.get_ident()
                    self.began = time.monotonic()
            if self._thread is not None:
                self.result = self.work()
        except BaseException as exc:  # TaskStopped, or the task's own SystemExit
            self.raised = exc
        finally:
            self.end()

    def end(self) -> None:
        """Mark the work ended and wake the reader (again if a TaskStopped cut the first
        call short: only one is ever raised)."""
        with self._lock:
            if self._thread is not None:
                if self._interrupted:
                    _async_raise(self._thread, None)  # one sent too late must not land later
                self._thread = None
            self.done = True
            self.ended = time.monotonic()
            self._changed.notify_all()

    # -- the reader --------------------------------------------------------------------------
    def wait(self, deadline: float | None, stopping: threading.Event | None,
             drain: float) -> Stop | None:
        """Wait until the attempt ended (None) or must be stopped (why): asked to, past its
        ``deadline`` (``time.monotonic()``), or ``drain`` seconds after ``stopping`` was set."""
        drained: float | None = None
        with self._lock:
            while not self.done and self.why is None:
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    self.why = Stop.TIMED_OUT
                    break
                if stopping is not None and stopping.is_set():
                    drained = now + drain if drained is None else drained
                    if now >= drained:
                        self.why = Stop.STOPPING
                        break
                ends = [t for t in (deadline, drained) if t is not None]
                self._changed.wait(min([POLL if stopping is not None else 3600.0,
                                        *(t - now for t in ends)]))
            return None if self.done and self.why is None else self.why

    def interrupt(self) -> None:
        """Raise ``TaskStopped`` in the attempt's thread, once, if its work still runs."""
        with self._lock:
            if self._thread is not None and not self._interrupted and self.interruptible:
                self._interrupted = True
                _async_raise(self._thread, TaskStopped)

    def wait_done(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the work to end; whether it did."""
        end = time.monotonic() + timeout
        with self._lock:
            while not self.done:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True

    def abandon(self) -> bool:
        """Walk away from the attempt unless it ended meanwhile; whether it was abandoned."""
        with self._lock:
            self.abandoned = not self.done
            frame = sys._current_frames().get(self._thread) if self._thread else None
            if self.abandoned and frame is not None:
                self.where = ("Where its code was when it was left behind (most recent call"
                              " last):\n" + "".join(traceback.format_list(
                                  _theirs(traceback.extract_stack(frame)))))
            return self.abandoned


class AttemptThread:
    """A reader's thread that runs its attempts one after another until one is stopped."""

    def __init__(self, name: str) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._next: Attempt[Any] | None = None
        self._closed = False
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def submit(self, attempt: Attempt[Any]) -> None:
        """Run ``attempt`` next (the previous one has ended)."""
        with self._lock:
            self._next = attempt
            self._changed.notify()

    def close(self) -> None:
        """Let the thread end once its attempt (if any) has."""
        with self._lock:
            self._closed = True
            self._changed.notify()

    def _take(self) -> Attempt[Any] | None:
        with self._lock:
            while self._next is None and not self._closed:
                self._changed.wait()
            attempt, self._next = self._next, None
            return attempt

    def _loop(self) -> None:
        while (attempt := self._take()) is not None:
            try:
                attempt.run()
            except TaskStopped:  # it landed on the way out of run(): finish the bookkeeping
                attempt.end()
            if attempt.stopped:
                return  # its Python state (a half-sent Spark call) is not trusted again


class Reader(Generic[T]):
    """What one executor reader uses to run attempts it can walk away from."""

    def __init__(self, name: str, *, grace: float = GRACE, drain: float = STOP_DRAIN) -> None:
        self.name = name
        self.grace = grace
        self.drain = drain
        self._thread: AttemptThread | None = None
        self._threads = 0

    def run(self, attempt: Attempt[T], *, stopping: threading.Event | None,
            stop_jobs: Callable[[int], object]) -> None:
        """Run ``attempt`` until it ends or is stopped (then: ``stop_jobs(log_id)``, a
        ``TaskStopped`` in its thread, ``grace`` seconds, and else abandon it)."""
        if self._thread is None:
            self._threads += 1
            self._thread = AttemptThread(f"{self.name}-attempt-{self._threads}")
        self._thread.submit(attempt)
        deadline = None if attempt.timeout is None else time.monotonic() + attempt.timeout
        why = attempt.wait(deadline, stopping, self.drain)
        if why is None:
            return
        self._thread = None  # never used again: a new one runs the next attempt
        if attempt.began is not None:
            stop_jobs(attempt.log_id)
            attempt.interrupt()
        if not attempt.wait_done(self.grace):
            attempt.abandon()

    def close(self) -> None:
        """End the idle attempt thread (a stuck one was let go already)."""
        if self._thread is not None:
            self._thread.close()
            self._thread = None
