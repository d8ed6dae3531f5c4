"""Joining the broker's background threads, even one whose start Ctrl-C cut short."""

from __future__ import annotations

import threading


def join(thread: threading.Thread | None, timeout: float | None = None) -> None:
    """Wait up to ``timeout`` for ``thread`` to end; its owner has already told it to stop.

    Nothing to wait for when there is no thread, when it is the calling thread (a thread that
    closes its own owner), or when its ``start()`` never finished. A KeyboardInterrupt landing
    inside ``Thread.start`` leaves a thread object that ``join`` refuses ("cannot join thread
    before it is started"), and a close on the way out must not fail on it: such a thread,
    once it runs, sees the stop its owner gave and ends by itself.
    """
    if thread is None or thread is threading.current_thread():
        return
    try:
        thread.join(timeout)
    except RuntimeError:
        if thread.is_alive():  # is_alive is False for a thread that has not started
            raise
