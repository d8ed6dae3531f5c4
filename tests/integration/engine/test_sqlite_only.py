"""Behaviour that exists only on SQLite, moved out of the conformance suite (which runs on
every backend):

- SQLite has one writer: a transaction that ran a write statement holds it, so a second
  transaction in the same thread would wait for itself forever; it gets a clear error
  instead.  PostgreSQL locks rows, and that second transaction simply runs.
- A commit finds its senders by rowid, so it must not take a new endpoint for a deleted one.
  SQLite gave the highest rowid again after a delete until migration 10 made endpoint rowids
  AUTOINCREMENT (a rowid also numbers a conversation group there); PostgreSQL's identity
  columns never reuse a value.
- SQLite's queue keeps a number per conversation group (its endpoints' group_key), not its
  UUID: a moved conversation's endpoint and queue rows take the new group's number.
"""

from __future__ import annotations

import pytest
from support.helpers import begin_and_send, bodies, send

import sbroker
from sbroker import Broker


def _rowids(broker: Broker) -> dict[str, int]:
    with broker.transaction() as tx:
        return dict(tx.execute("SELECT handle, conv_order FROM sb_endpoints").fetchall())


def _targets(pair: Broker, count: int) -> list[str]:
    """``count`` conversations whose target endpoints exist (their first message received)."""
    with pair.transaction() as tx:
        inits = [tx.begin_dialog("InitService", "TargetService") for _ in range(count)]
        tx.send(inits, "DEFAULT", b"hello")
    targets = []
    with pair.transaction() as tx:
        for _ in range(count):
            [msg] = tx.receive("TargetQueue", top=1)
            targets.append(msg.conversation_handle)
    return targets


def test_a_sender_removed_before_commit_and_its_rowid_not_given_again(pair: Broker) -> None:
    """The commit finds its senders by the rowid their statements saw: the sender is gone
    (8426), and the endpoint begun since has a rowid of its own."""
    targets = sorted(_targets(pair, 3), key=_rowids(pair).__getitem__)
    rowid = _rowids(pair)
    tx = pair.transaction()
    tx.send(targets[1:], "DEFAULT", b"back")
    with pair.transaction() as other:
        other.end_conversation(targets[-1], cleanup=True)
    with pair.transaction() as other:  # once took the freed rowid, and is conversing
        reuse = other.begin_dialog("InitService", "TargetService")
        other.send(reuse, "DEFAULT", b"first")
    assert _rowids(pair)[reuse] > max(rowid.values())
    with pytest.raises(sbroker.CommitConflictError) as e:
        tx.commit()
    assert e.value.number == 8426
    with pair.transaction() as tx:
        got = tx.receive("TargetQueue") + tx.receive("InitQueue")
    assert [m.text() for m in got] == ["first"]


def test_a_second_transaction_in_the_thread_of_a_held_one_gets_a_clear_error(
        pair: Broker) -> None:
    with pair.transaction() as tx:
        tx.execute("CREATE TABLE t (x INTEGER)")
    outer = pair.transaction()
    outer.execute("INSERT INTO t VALUES (1)")  # holds the write lock until it ends
    with pytest.raises(sbroker.TransactionStateError, match="write lock"), \
            pair.transaction() as inner:
        inner.begin_dialog("InitService", "TargetService")
    outer.commit()
    with pair.transaction() as tx:  # the lock is free again
        tx.begin_dialog("InitService", "TargetService")
    assert pair.view("t") == [{"x": 1}]


def _groups(broker: Broker) -> dict[str, int]:
    with broker.db.connection() as conn:
        return dict(conn.execute("SELECT DISTINCT group_id, group_key FROM sb_endpoints")
                    .fetchall())


def _message_keys(broker: Broker) -> dict[str, int]:
    with broker.db.connection() as conn:
        return dict(conn.execute("SELECT handle, group_key FROM sb_messages").fetchall())


def test_a_group_keeps_its_number_and_a_moved_conversation_s_messages_follow_it(
        pair: Broker) -> None:
    begin_and_send(pair, "a")
    b_initiator = begin_and_send(pair, "b1", "b2")
    a, b, _ = pair.peek("TargetQueue")
    before = _groups(pair)
    with pair.transaction() as tx:
        tx.move_conversation(b.conversation_handle, a.conversation_group_id)
    after = _groups(pair)
    assert b.conversation_group_id in before and b.conversation_group_id not in after
    assert after == {g: k for g, k in before.items() if g != b.conversation_group_id}
    a_key = before[a.conversation_group_id]
    assert _message_keys(pair)[b.conversation_handle] == a_key
    send(pair, b_initiator, "b3")  # numbered by the moved endpoint's group
    with pair.db.connection() as conn:
        assert conn.execute("SELECT DISTINCT group_key FROM sb_messages").fetchall() == [
            (a_key,)]
    assert {m.conversation_group_id for m in pair.peek("TargetQueue")} == {
        a.conversation_group_id}
    with pair.transaction() as tx:
        assert bodies(tx.receive("TargetQueue")) == ["a", "b1", "b2", "b3"]
