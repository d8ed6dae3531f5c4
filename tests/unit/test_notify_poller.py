"""The data_version poller looks often while the database changes and backs off while it does
not, so that a waiting reader does not cost a busy loop; a change brings it back at once."""

from __future__ import annotations

import threading

from sbroker.core.clock import SystemClock
from sbroker.engine.notify import POLL_MAX_SECONDS, POLL_SECONDS, Notifier


class _Versions:
    """A stand-in connection whose data_version follows a script, one value per read."""

    def __init__(self, script: list[int]) -> None:
        self.script = script
        self.reads = 0

    def execute(self, sql: str) -> _Versions:
        assert sql == "PRAGMA data_version"
        return self

    def fetchone(self) -> tuple[int]:
        value = self.script[min(self.reads, len(self.script) - 1)]
        self.reads += 1
        return (value,)

    def close(self) -> None:
        pass


def test_the_poller_backs_off_while_idle_and_speeds_up_on_a_change() -> None:
    # read 0 is the baseline; then 7 quiet reads, a change, 3 quiet reads
    conn = _Versions([1] * 8 + [2] * 4)
    notifier = Notifier(SystemClock(), lambda: conn)  # type: ignore[arg-type, return-value]
    pauses: list[float] = []
    done = threading.Event()

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 11:
            notifier.close()  # the poller returns at its next turn
            done.set()

    notifier._pause = pause
    version = notifier.version
    with notifier.cond:
        notifier._waiters = 1  # as if a RECEIVE waited
        notifier._ensure_poller()
    assert done.wait(10)
    poller = notifier._poller
    if poller is not None:
        poller.join(10)
    quiet = [min(POLL_SECONDS * 2 ** k, POLL_MAX_SECONDS) for k in range(8)]
    assert pauses[:8] == quiet  # doubling, capped
    assert pauses[8:] == [POLL_SECONDS, 2 * POLL_SECONDS, 4 * POLL_SECONDS]  # after the change
    assert notifier.version == version + 1  # the change woke waiters once
