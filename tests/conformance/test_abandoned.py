"""A transaction dropped without COMMIT or ROLLBACK is rolled back when it is collected:
its group locks are freed, a write statement's hold on the writer is let go, and the
RECEIVE counts as rolled back (poison detection)."""

from __future__ import annotations

import gc
import threading

import sbroker


def _one_message(pair: sbroker.Broker) -> str:
    with pair.transaction() as tx:
        handle = tx.begin_dialog("InitService", "TargetService")
        tx.send(handle, "DEFAULT", b"work")
    return handle


def _drop_a_receiver(pair: sbroker.Broker) -> None:
    tx = pair.transaction()
    (msg,) = tx.receive("TargetQueue")
    assert msg.message_body == b"work"
    del tx, msg  # neither committed nor rolled back


def test_a_dropped_receive_frees_its_group(pair: sbroker.Broker) -> None:
    _one_message(pair)
    _drop_a_receiver(pair)
    gc.collect()
    with pair.transaction() as tx:  # woken by the roll back's notification, not a sleep
        (msg,) = tx.receive("TargetQueue", timeout=10)
    assert msg.message_body == b"work"
    rollbacks = pair.transaction()
    try:
        count = rollbacks.execute(
            "SELECT rollback_count FROM sb_queues WHERE name = 'TargetQueue'").fetchone()[0]
    finally:
        rollbacks.rollback()
    assert count == 0  # counted once as rolled back, then reset by the commit above


def test_a_dropped_receive_counts_as_a_rollback(pair: sbroker.Broker) -> None:
    _one_message(pair)
    _drop_a_receiver(pair)
    gc.collect()
    with pair.transaction() as tx:  # a commit that takes nothing leaves the count alone
        assert tx.receive("TargetQueue", timeout=10)  # wait for the roll back to land
        tx.rollback()
    with pair.transaction() as tx:
        count = tx.execute(
            "SELECT rollback_count FROM sb_queues WHERE name = 'TargetQueue'").fetchone()[0]
    assert count == 2  # the dropped one and the explicit one


def test_a_dropped_write_statement_lets_the_writer_go(pair: sbroker.Broker) -> None:
    with pair.transaction() as tx:
        tx.execute("CREATE TABLE app (x INTEGER)")
    tx = pair.transaction()
    tx.execute("INSERT INTO app VALUES (1)")  # holds the writer's connection
    del tx
    gc.collect()
    done = threading.Event()

    def later_commit() -> None:
        _one_message(pair)
        done.set()

    t = threading.Thread(target=later_commit, daemon=True)
    t.start()
    assert done.wait(30), "a later commit waited forever behind the dropped transaction"
    with pair.transaction() as check:
        assert check.execute("SELECT count(*) FROM app").fetchone()[0] == 0  # rolled back


def test_a_finished_transaction_leaves_nothing_to_undo(pair: sbroker.Broker) -> None:
    _one_message(pair)
    tx = pair.transaction()
    assert tx.receive("TargetQueue")
    tx.commit()
    left = tx._left
    del tx
    gc.collect()
    assert left is None
    with pair.transaction() as check:
        count = check.execute(
            "SELECT rollback_count FROM sb_queues WHERE name = 'TargetQueue'").fetchone()[0]
        assert not check.receive("TargetQueue")
    assert count == 0
