"""The stop signal of the activated procedure running in this thread.

When the broker stops, a procedure waiting in ``RECEIVE ... timeout=`` must not hold the stop
until its timeout (seed 002's executor waits 30 s for the next task): its wait ends as if the
timeout had passed, and the procedure returns as it does on an empty queue.  Only waits made
in an activated procedure's own thread are ended; other sessions' waits are untouched.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_local = threading.local()


def current() -> threading.Event | None:
    """The stop event of the activated procedure this thread runs (None outside one)."""
    event: threading.Event | None = getattr(_local, "event", None)
    return event


def requested() -> bool:
    """Whether this thread runs an activated procedure that was asked to stop."""
    event = current()
    return event is not None and event.is_set()


@contextmanager
def bound(event: threading.Event) -> Iterator[None]:
    """Run the block (an activated procedure) with ``event`` as this thread's stop event."""
    previous = current()
    _local.event = event
    try:
        yield
    finally:
        _local.event = previous
