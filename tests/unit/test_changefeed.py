"""The SQLite change feed looks often while the database changes and backs off while it does
not, so that a waiting reader does not cost a busy loop; a change brings it back at once.
Subscribers with a minimum interval are told at most that often, and never miss the last
change."""

from __future__ import annotations

import threading

from sbroker.storage.sqlite.changefeed import POLL_MAX_SECONDS, POLL_SECONDS, DataVersionFeed


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
    feed = DataVersionFeed(lambda: conn)  # type: ignore[arg-type, return-value]
    told: list[int] = []
    feed.subscribe(lambda: told.append(conn.reads))
    pauses: list[float] = []
    done = threading.Event()

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 11:
            done.set()

    feed.pause = pause
    with feed.watch():  # as if a RECEIVE waited
        assert done.wait(10)
    feed.close()
    quiet = [min(POLL_SECONDS * 2 ** k, POLL_MAX_SECONDS) for k in range(8)]
    assert pauses[:8] == quiet  # doubling, capped
    assert pauses[8:11] == [POLL_SECONDS, 2 * POLL_SECONDS, 4 * POLL_SECONDS]  # after change
    assert told == [9]  # the change was told once, right after the read that saw it


def test_a_subscriber_with_an_interval_is_told_of_a_change_once_the_interval_passed() -> None:
    conn = _Versions([1])
    feed = DataVersionFeed(lambda: conn)  # type: ignore[arg-type, return-value]
    told: list[str] = []
    feed.subscribe(lambda: told.append("slow"), min_interval=3600.0)
    feed.subscribe(lambda: told.append("fast"))
    feed._changed()  # two changes in a row: the slow one is told once
    feed._changed()
    assert told == ["slow", "fast", "fast"]
    feed.close()
