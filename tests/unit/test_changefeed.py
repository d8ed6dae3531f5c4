"""The SQLite change feed looks often while the database changes and backs off while it does
not, so that a waiting reader does not cost a busy loop; a change brings it back at once.
Subscribers with a minimum interval are told at most that often, and never miss the last
change.  Between waits the poller keeps its thread and connection a while, without looking."""

from __future__ import annotations

import contextlib
import queue
import threading

import pytest

from sbroker.engine.notify import Notifier
from sbroker.storage.sqlite.changefeed import (
    LINGER_SECONDS,
    POLL_MAX_SECONDS,
    POLL_SECONDS,
    DataVersionFeed,
)


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


class _Live:
    """A stand-in connection whose data_version is whatever the test set last."""

    def __init__(self) -> None:
        self.version = 1

    def execute(self, sql: str) -> _Live:
        assert sql == "PRAGMA data_version"
        return self

    def fetchone(self) -> tuple[int]:
        return (self.version,)

    def close(self) -> None:
        pass


class _Stepper:
    """The poller's pause, one step at a time: ``pauses`` gets each pause's length, and the
    poller waits there until the test lets it go (``step``)."""

    def __init__(self) -> None:
        self.pauses: queue.Queue[float] = queue.Queue()
        self.go: queue.Queue[None] = queue.Queue()

    def pause(self, seconds: float) -> None:
        self.pauses.put(seconds)
        self.go.get(timeout=10)

    def step(self) -> float:
        """Let the poller look once; the length of the pause it takes next."""
        self.go.put(None)
        return self.pauses.get(timeout=10)


def test_between_watchers_the_poller_stays_a_while_looking_slowly_and_telling_nobody(
) -> None:
    live, connects, told, clock = _Live(), [], [], [0.0]

    def connect() -> _Live:
        connects.append(1)
        return live

    feed = DataVersionFeed(connect)  # type: ignore[arg-type]
    stepper = _Stepper()
    feed.pause, feed.now = stepper.pause, lambda: clock[0]
    feed.subscribe(lambda: told.append(live.version))
    with feed.watch():
        assert stepper.pauses.get(timeout=10) == POLL_SECONDS
        live.version = 2
        assert stepper.step() == POLL_SECONDS  # a change, told
        assert told == [2]
    thread = feed._worker
    assert stepper.step() == POLL_MAX_SECONDS  # nobody watches: it looks every 16 ms
    live.version = 3
    assert stepper.step() == POLL_MAX_SECONDS
    assert told == [2]  # a change while nobody watched is noted, not told
    clock[0] += LINGER_SECONDS / 2
    with feed.watch():  # the next watcher: the same thread and connection
        assert stepper.step() == POLL_MAX_SECONDS  # nothing new since it last looked
        live.version = 4
        assert stepper.step() == POLL_SECONDS
        assert told == [2, 4]
    assert feed._worker is thread and connects == [1]
    assert stepper.step() == POLL_MAX_SECONDS
    clock[0] += LINGER_SECONDS
    stepper.go.put(None)  # nobody came back for LINGER_SECONDS: it ends
    assert thread is not None
    thread.join(10)
    assert not thread.is_alive() and feed._worker is None
    feed.close()


def test_a_change_made_while_the_lingering_poller_paused_is_told_to_a_watcher_that_came(
) -> None:
    """A RECEIVE starts waiting while the lingering poller pauses, and the message it waits
    for is committed before the poller looks: the look must tell it. (It was only noted, as
    if nobody watched, and the reader slept until its half-second re-check.)"""
    live, told = _Live(), []
    feed = DataVersionFeed(lambda: live)  # type: ignore[arg-type, return-value]
    stepper = _Stepper()
    feed.pause = stepper.pause
    feed.subscribe(lambda: told.append(live.version))
    with feed.watch():
        assert stepper.pauses.get(timeout=10) == POLL_SECONDS
    assert stepper.step() == POLL_MAX_SECONDS  # nobody watches: a slow pause begins
    with feed.watch():  # the next RECEIVE waits...
        live.version = 2  # ...and its message is committed, both within that pause
        stepper.step()
        assert told == [2]
    stepper.go.put(None)
    feed.close()


class _NoSleep:
    """A clock for the Notifier under test: waiting on it is the failure being tested."""

    def now(self) -> float:
        return 0.0

    def monotonic(self) -> float:
        return 0.0

    def wait(self, cond: threading.Condition, deadline: float | None) -> None:
        raise AssertionError("the reader slept though the change it waits for was noticed")


def test_a_change_noticed_between_a_readers_look_and_its_wait_ends_the_wait_at_once() -> None:
    """The reader takes its token and looks at the queue; the message is committed and the
    lingering poller notices it while nobody watches (so it tells nobody); then the reader
    begins to wait. It must look again at once, not sleep until its half-second re-check."""
    live = _Live()
    feed = DataVersionFeed(lambda: live)  # type: ignore[arg-type, return-value]
    stepper = _Stepper()
    feed.pause = stepper.pause
    notifier = Notifier(_NoSleep(), feed)  # type: ignore[arg-type]
    with feed.watch():
        assert stepper.pauses.get(timeout=10) == POLL_SECONDS
    assert stepper.step() == POLL_MAX_SECONDS  # the poller lingers, unwatched
    token = notifier.token(1)  # the reader looks at queue 1: empty
    live.version = 2  # the message is committed...
    stepper.step()  # ...and noticed while nobody watches
    notifier.wait(token, None, queue_id=1)  # returns at once
    with pytest.raises(AssertionError, match="the reader slept"):
        notifier.wait(notifier.token(1), None, queue_id=1)  # nothing new since: it sleeps
    stepper.go.put(None)
    feed.close()


class _QuietFeed:
    """A change feed that never notices anything (the Notifier under test is bumped directly)."""

    noticed = 0

    def subscribe(self, on_change: object, *, min_interval: float = 0.0) -> None:
        pass

    def watch(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


class _TellsWhenWaiting:
    """A clock that says when a reader starts to wait, and waits at most ``limit`` seconds."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.waiting = threading.Event()

    def now(self) -> float:
        return 0.0

    def monotonic(self) -> float:
        return 0.0

    def wait(self, cond: threading.Condition, deadline: float | None) -> None:
        self.waiting.set()
        cond.wait(self.limit)


def test_a_bump_with_nobody_waiting_still_moves_the_version_a_later_wait_compares() -> None:
    """A commit's bump skips waking anyone when nobody waits, but a reader that took its
    token before it and waits after it returns at once."""
    notifier = Notifier(_NoSleep(), _QuietFeed())  # type: ignore[arg-type]
    token = notifier.token(1)
    notifier.bump([1])
    notifier.wait(token, None, queue_id=1)  # returns at once (_NoSleep fails a sleep)
    token = notifier.token(2)
    notifier.bump(None)  # a change anywhere: every queue's readers look again
    notifier.wait(token, None, queue_id=2)


def test_a_bump_wakes_a_reader_that_waits() -> None:
    clock = _TellsWhenWaiting(limit=60.0)
    notifier = Notifier(clock, _QuietFeed())  # type: ignore[arg-type]
    token = notifier.token(1)
    reader = threading.Thread(target=notifier.wait, args=(token, None, 1), daemon=True)
    reader.start()
    assert clock.waiting.wait(10)
    notifier.bump([1])
    reader.join(10)  # far less than the reader's own 60 s limit: the bump woke it
    assert not reader.is_alive()
