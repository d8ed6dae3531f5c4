"""The PostgreSQL change feed tells other processes of a commit that brought work (sent,
began or ended conversations) at once, and of one that only received within
QUIET_NOTIFY_SECONDS: every process wakes at each NOTIFY, so the receive-only commits of many
readers are told together."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from sbroker.storage.postgres.session import QUIET_NOTIFY_SECONDS, ListenFeed


class _Server:
    """A stand-in connector: its connection records each NOTIFY's payload."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.notified = threading.Event()
        self.closed = False
        self.broken = False

    def connect_raw(self) -> _Server:
        return self

    def execute(self, sql: str, params: Any = None) -> None:
        self.sent.append(params[0])
        self.notified.set()

    def close(self) -> None:
        self.closed = True


def _feed() -> tuple[ListenFeed, _Server]:
    server = _Server()
    feed = ListenFeed(server)  # type: ignore[arg-type]
    feed.session = 7
    return feed, server


def test_a_commit_that_brought_work_is_due_at_once_and_a_receive_only_one_later() -> None:
    feed, _ = _feed()
    assert feed.next_notify(100.0) is None
    feed._quiet_at = 100.0 + QUIET_NOTIFY_SECONDS  # as committed(quiet=True) at 100.0 sets it
    assert feed.next_notify(100.0) == pytest.approx(QUIET_NOTIFY_SECONDS)
    assert feed.next_notify(100.0 + QUIET_NOTIFY_SECONDS) == 0.0
    feed._urgent = True
    assert feed.next_notify(100.0) == 0.0


def test_both_kinds_of_commit_are_told_and_a_lone_broker_tells_nobody() -> None:
    feed, server = _feed()
    try:
        feed.committed(quiet=True)
        assert server.notified.wait(10)
        assert server.sent == ["7"]
        server.notified.clear()
        feed.committed()
        assert server.notified.wait(10)
        assert server.sent == ["7", "7"]
    finally:
        feed.close()
    alone, quiet_server = _feed()
    alone.others = False
    alone.committed()
    alone.committed(quiet=True)
    alone.close()
    assert quiet_server.sent == []


def test_a_receive_only_commit_sets_one_deadline_that_later_ones_share() -> None:
    feed, _ = _feed()
    feed._worker = threading.current_thread()  # no sender thread: look at the state only
    feed.committed(quiet=True)
    first = feed._quiet_at
    assert first is not None and not feed._urgent
    feed.committed(quiet=True)
    assert feed._quiet_at == first
    feed.committed()
    assert feed._urgent and feed._quiet_at == first


class _CountingCondition(threading.Condition):
    """A condition that counts its ``notify`` calls: each one wakes the sender thread."""

    def __init__(self, lock: Any) -> None:
        super().__init__(lock)
        self.wakes = 0

    def notify(self, n: int = 1) -> None:
        self.wakes += 1
        super().notify(n)


def test_the_sender_is_woken_only_when_its_deadline_moves() -> None:
    # Every reader commit calls committed(quiet=True): waking the sender each time cost a
    # thread switch per message in each process of a multi-host drain.
    feed, _ = _feed()
    feed._worker = threading.current_thread()  # no sender thread: look at the state only
    due = feed._due = _CountingCondition(feed._lock)
    feed.committed(quiet=True)
    assert due.wakes == 1  # a deadline now exists
    feed.committed(quiet=True)
    assert due.wakes == 1  # the same deadline
    feed.committed()
    assert due.wakes == 2  # now due at once
    feed.committed()
    feed.committed(quiet=True)
    assert due.wakes == 2  # already due at once
    feed._urgent, feed._quiet_at = False, None  # as the sender does when it sends
    feed.committed(quiet=True)
    assert due.wakes == 3
