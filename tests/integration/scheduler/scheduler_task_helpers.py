"""Python task targets of the scheduler tests (called as ``f(spark, **kwargs)``)."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Any


def kaboom(spark: Any, what: str = "kaboom") -> None:
    """A task that fails a call deeper than its own frame."""
    _check(what)


def _check(what: str) -> None:
    raise ValueError(what)


# -- uncooperative tasks: the executor must stop them without their help --------------------
_lock = threading.Lock()
_events: dict[str, threading.Event] = {}
started: dict[str, threading.Event] = {}


def event(key: str) -> threading.Event:
    """The event that ``block(key=key)`` waits for (the test sets it when it is done)."""
    with _lock:
        return _events.setdefault(key, threading.Event())


def began(key: str) -> threading.Event:
    """Set when a task with this key has begun."""
    with _lock:
        return started.setdefault(key, threading.Event())


def block(spark: Any, key: str) -> str:
    """Blocks in one C call (a lock's acquire) until the test sets ``event(key)``: nothing
    in it can be interrupted, and it ignores every exception it could catch."""
    began(key).set()
    event(key).wait()
    return "returned late"


def spin(spark: Any, key: str) -> None:
    """A pure-Python loop that swallows every ``Exception`` and never ends by itself."""
    began(key).set()
    while True:
        with contextlib.suppress(Exception):  # the point: it does not let errors stop it
            time.sleep(0.005)


_barriers: dict[str, threading.Barrier] = {}


def meet(spark: Any, key: str) -> None:
    """Returns once two tasks with this key run at the same time (fails after 30 s)."""
    with _lock:
        barrier = _barriers.setdefault(key, threading.Barrier(2))
    barrier.wait(timeout=30)


def leave(spark: Any) -> None:
    """Calls sys.exit, as a script would."""
    sys.exit(3)
