"""What operators see (docs/dashboard.md, docs/operations.md): enqueue times, queue figures and
counters kept in the database, activation views shared by every process, session ids never
reused."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from support.helpers import Child, begin_and_send, bodies, make_pair, send

import sbroker
from sbroker import Broker, FakeClock


@pytest.fixture
def db_path(database: str) -> str:
    """The test's broker database, on each backend (tests/conftest.py's ``database``)."""
    return database


# The SQLite writer's sweep of consumed marks; a killed process's session seen dead at once
# by its pid (PostgreSQL's session lease outlives a kill -9 by a grace period).
SQLITE_ONLY = pytest.mark.parametrize("database", ["sqlite"], indirect=True)


def _stats(b: Broker, queue: str = "TargetQueue") -> dict[str, object]:
    [row] = [r for r in b.view("queue_stats") if r["queue_name"] == queue]
    return row


def _totals(b: Broker) -> tuple[object, object]:
    row = _stats(b)
    return row["messages_enqueued_total"], row["messages_received_total"]


def test_a_message_records_when_it_was_enqueued_on_the_brokers_clock(db_path: Path) -> None:
    clock = FakeClock(1_800_000_000.0)
    with make_pair(Broker.open(db_path, clock=clock)) as b:
        begin_and_send(b, "first")
        clock.advance(7.5)
        begin_and_send(b, "second")
        assert [m.message_enqueue_time for m in b.peek("TargetQueue")] == [
            1_800_000_000.0, 1_800_000_007.5]
        with b.transaction() as tx:
            [got] = tx.receive("TargetQueue")
        assert got.message_enqueue_time == 1_800_000_000.0


def test_queue_stats_split_ready_and_locked_messages_and_give_the_oldest(
        db_path: Path) -> None:
    clock = FakeClock(1_800_000_000.0)
    with make_pair(Broker.open(db_path, clock=clock)) as b:
        begin_and_send(b, "a1", "a2")
        clock.advance(1)
        begin_and_send(b, "b1")
        row = _stats(b)
        assert (row["ready_messages"], row["locked_messages"]) == (3, 0)
        assert row["oldest_enqueue_time"] == 1_800_000_000.0
        assert row["is_enabled"] == 1
        tx = b.transaction()
        assert bodies(tx.receive("TargetQueue")) == ["a1", "a2"]
        b.db.commit_path.run(lambda conn: None)  # SQLite writes lazily held locks at a commit
        row = _stats(b)
        assert (row["ready_messages"], row["locked_messages"]) == (1, 2)
        tx.commit()
        row = _stats(b)
        assert (row["ready_messages"], row["locked_messages"]) == (1, 0)
        assert row["oldest_enqueue_time"] == 1_800_000_001.0


@SQLITE_ONLY
def test_counters_count_every_way_a_message_leaves_and_never_go_down(db_path: Path) -> None:
    with make_pair(Broker.open(db_path)) as b:
        seen: list[tuple[object, object]] = []

        def check(enqueued: int, received: int) -> None:
            totals = _totals(b)
            assert totals == (enqueued, received)
            if seen:
                assert totals[0] >= seen[-1][0] and totals[1] >= seen[-1][1]  # type: ignore[operator]
            seen.append(totals)

        one = begin_and_send(b, *[f"m{i}" for i in range(10)])
        check(10, 0)
        with b.transaction() as tx:  # one row: marked, not deleted
            assert len(tx.receive("TargetQueue", top=1)) == 1
        check(10, 1)
        with b.transaction() as tx:  # several rows together: deleted at once
            assert len(tx.receive("TargetQueue", top=4)) == 4
        check(10, 5)
        b.db.writer.run(b.db.sweeper.sweep)  # the marks are swept: the count stays
        check(10, 5)
        two = begin_and_send(b, "x", "y")
        check(12, 5)
        with b.transaction() as tx:  # the target ends: its unreceived rows are removed
            [target] = {m.conversation_handle for m in tx.receive("TargetQueue", top=1)}
            tx.end_conversation(target)
        check(12, 6)
        assert _stats(b)["ready_messages"] == 2  # x and y
        with b.transaction() as tx:
            tx.end_conversation(one)  # its target ended already: nothing arrives here
            tx.end_conversation(two)  # an EndDialog arrives for two's target
        check(13, 6)
        assert _stats(b)["ready_messages"] == 3
    with Broker.open(db_path) as b:  # kept in the database: survive a reopen
        assert _totals(b) == seen[-1]


def test_received_retained_messages_count_as_received(db_path: Path) -> None:
    with Broker.open(db_path) as b:
        b.create_queue("InitQueue")
        b.create_queue("TargetQueue", retention=True)
        b.create_service("InitService", "InitQueue")
        b.create_service("TargetService", "TargetQueue", ["DEFAULT"])
        handle = begin_and_send(b, "kept")
        with b.transaction() as tx:
            [msg] = tx.receive("TargetQueue")
        assert _totals(b) == (1, 1)
        with b.transaction() as tx:
            tx.end_conversation(msg.conversation_handle)
            tx.end_conversation(handle)
        assert _totals(b) == (1, 1)


def test_session_ids_are_never_reused_across_processes(db_path: Path) -> None:
    with Broker.open(db_path) as b:
        first = b.session_id
    with Broker.open(db_path) as b:  # the first one's row is gone: its id must not return
        assert b.session_id > first


@SQLITE_ONLY
def test_activation_views_show_every_process_and_forget_one_that_died(
        db_path: Path, spawn: Callable[..., Child]) -> None:
    with make_pair(Broker.open(db_path)):
        pass
    child = spawn("activate-hold", db_path, "TargetQueue")
    pid = child.expect("running")["pid"]
    with Broker.open(db_path) as b:
        [task] = b.view("dm_broker_activated_tasks")
        assert (task["queue_name"], task["pid"], task["host"]) == (
            "TargetQueue", pid, socket.gethostname())
        [monitor] = b.view("dm_broker_queue_monitors")
        assert (monitor["queue_name"], monitor["pid"]) == ("TargetQueue", pid)
        assert monitor["tasks_running"] == 1
        assert _stats(b)["readers_running"] == 1
        child.kill9()
        assert b.view("dm_broker_activated_tasks") == []
        assert b.view("dm_broker_queue_monitors") == []
        assert _stats(b)["readers_running"] == 0
        assert pid != os.getpid()


def test_a_send_counts_nothing_until_it_commits(db_path: Path) -> None:
    with make_pair(Broker.open(db_path)) as b:
        handle = begin_and_send(b)
        tx = b.transaction()
        tx.send(handle, body="pending")
        assert _totals(b) == (0, 0)
        tx.rollback()
        send(b, handle, "done")
        assert _totals(b) == (1, 0)
        assert isinstance(sbroker.Broker, type)
