"""Received messages spread thin over the queue are marked consumed at COMMIT and deleted
later in bulk; dense ones are deleted at once (consumed.py).  A marked message is gone for
every reader at once, the sweep deletes it, and marks never pile up."""

from __future__ import annotations

from support.helpers import begin_and_send, bodies, send

from sbroker import Broker
from sbroker.storage.sqlite.sweeper import DENSE, SWEEP_COMMITS


def _marking(b: Broker, every_commits: int = SWEEP_COMMITS) -> Broker:
    """Mark every received row, however dense; sweep every ``every_commits`` commits."""
    b.db.sweeper.dense, b.db.sweeper.every_commits = 0, every_commits
    return b


def _physical(b: Broker) -> tuple[int, int]:
    """(rows in sb_messages, rows in sb_consumed), counted on the file."""
    with b.db.connection() as conn:
        return (conn.execute("SELECT count(*) FROM sb_messages").fetchone()[0],
                conn.execute("SELECT count(*) FROM sb_consumed").fetchone()[0])


def _receive(b: Broker, top: int | None = None) -> list[str]:
    with b.transaction() as tx:
        return bodies(tx.receive("TargetQueue", top=top))


def test_one_row_is_marked_and_rows_received_together_are_deleted_at_once(
        pair: Broker) -> None:
    begin_and_send(pair, "1", "2", "3")
    assert _receive(pair, top=1) == ["1"]
    assert _physical(pair) == (3, 1)  # one row: marked (one page written, not three)
    assert _receive(pair) == ["2", "3"]
    assert _physical(pair) == (1, 1)  # two adjacent rows: deleted at once


def test_rows_spread_over_the_queue_are_marked(pair: Broker) -> None:
    handles = [begin_and_send(pair) for _ in range(2 * DENSE)]
    for k in range(2):  # round-robin: each conversation's two rows are 2 * DENSE apart
        with pair.transaction() as tx:
            for c, handle in enumerate(handles):
                tx.send(handle, body=f"{c}:{k}")
    assert _receive(pair) == ["0:0", "0:1"]
    assert _physical(pair) == (4 * DENSE, 2)


def test_a_received_message_is_marked_and_gone_for_every_reader(pair: Broker) -> None:
    _marking(pair)
    begin_and_send(pair, "1", "2", "3", "4", "5")
    assert _receive(pair, top=2) == ["1", "2"]
    assert _physical(pair) == (5, 2)  # marked, not yet deleted
    assert bodies(pair.peek("TargetQueue")) == ["3", "4", "5"]
    assert _receive(pair) == ["3", "4", "5"]
    assert _physical(pair) == (5, 5)
    assert pair.peek("TargetQueue") == []
    with pair.transaction() as tx:
        assert tx.receive("TargetQueue", timeout=0) == []
        assert tx.get_conversation_group("TargetQueue") is None
    with pair.transaction() as tx:
        assert tx.ready_groups("TargetQueue") == []
    queue_id = pair.catalog.queue("TargetQueue").queue_id
    with pair.db.connection() as conn:
        assert conn.execute(conn.sql.queue_look, (queue_id, "[]")).fetchone() == (0, 0)


def test_the_sweep_deletes_the_marked_messages_and_their_marks(pair: Broker) -> None:
    _marking(pair, every_commits=2)
    handle = begin_and_send(pair, "1", "2", "3")
    assert _receive(pair, top=1) == ["1"]
    assert _physical(pair) == (3, 1)
    assert _receive(pair, top=1) == ["2"]  # the second receiving commit sweeps
    assert _physical(pair) == (1, 0)
    send(pair, handle, "4")
    assert _receive(pair) == ["3", "4"]
    assert _physical(pair) == (2, 2)


def test_marks_never_pile_up_over_many_receives(pair: Broker) -> None:
    _marking(pair)
    handle = begin_and_send(pair)
    most = 0
    for i in range(3 * SWEEP_COMMITS):
        send(pair, handle, str(i), str(i))
        assert _receive(pair) == [str(i), str(i)]
        most = max(most, _physical(pair)[1])
    assert most <= 2 * SWEEP_COMMITS  # two messages per receiving commit between sweeps
    assert _physical(pair)[0] == _physical(pair)[1]  # nothing left but what awaits a sweep


def test_a_mark_needs_the_same_message_id(pair: Broker) -> None:
    """The mark keeps the delete's guard: a queuing_order whose row was deleted and reused by
    a new message must not mark that message."""
    begin_and_send(pair, "new", "taken")
    new, taken = pair.peek("TargetQueue")
    _marking(pair)
    queue_id = pair.catalog.queue("TargetQueue").queue_id
    pair.db.writer.run(lambda conn: pair.db.sweeper.consume(
        conn, [(new.queuing_order, "not-" + new.message_id),
               (taken.queuing_order, taken.message_id)], queue_id))
    assert _physical(pair) == (2, 1)  # one statement marks the rows: only the matching one
    assert _receive(pair) == ["new"]


def test_the_mark_of_a_message_deleted_otherwise_hides_nothing_and_is_swept(
        pair: Broker) -> None:
    _marking(pair, every_commits=2)
    begin_and_send(pair, "1", "2")
    with pair.transaction() as tx:
        got = tx.receive("TargetQueue", top=1)
        target = got[0].conversation_handle
    assert _physical(pair) == (2, 1)
    with pair.transaction() as tx:
        tx.end_conversation(target, cleanup=True)
    assert _physical(pair) == (0, 1)  # the mark of a row that is gone
    begin_and_send(pair, "3")  # a new message never takes a position that was marked
    assert _receive(pair) == ["3"]  # the second marking commit: the sweep
    assert _physical(pair) == (0, 0)


def test_a_rolled_back_receive_marks_nothing(pair: Broker) -> None:
    _marking(pair)
    begin_and_send(pair, "1")
    tx = pair.transaction()
    assert bodies(tx.receive("TargetQueue")) == ["1"]
    tx.rollback()
    assert _physical(pair) == (1, 0)
    assert _receive(pair) == ["1"]
