"""Conversation-group locks on a real file: a held group delays nobody else, is never handed
to a second reader (threads or processes), keeps receiving messages, and frees on commit."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.helpers import Background, Child, Holder, begin_and_send, bodies, send

from sbroker import Broker, CommitConflictError


@pytest.fixture
def db_path(database: str) -> str:
    """The test's broker database, on each backend (tests/conftest.py's ``database``)."""
    return database


def _receive_group(b: Broker, **kw: object) -> tuple[str | None, list[str]]:
    with b.transaction() as tx:
        got = tx.receive("TargetQueue", **kw)  # type: ignore[arg-type]
        return (got[0].conversation_group_id if got else None), bodies(got)


def test_a_held_group_never_delays_receiving_another_group_sending_or_beginning(
    pair: Broker,
) -> None:
    a = begin_and_send(pair, "a1", "a2")
    begin_and_send(pair, "b1")
    holder = Holder(pair, lambda tx: tx.receive("TargetQueue", top=1))
    assert bodies(holder.value) == ["a1"]

    def other_work() -> dict[str, object]:
        out: dict[str, object] = {}
        with pair.transaction() as tx:  # receive group B while A is held
            out["received"] = bodies(tx.receive("TargetQueue"))
        with pair.transaction() as tx:  # send, on A's conversation and on a new one
            tx.send(a, body="a3")
            fresh = tx.begin_dialog("InitService", "TargetService")
            tx.send(fresh, body="c1")
        out["group_a_still_held"] = not holder.finished
        return out

    out = Background(other_work).result()
    assert out == {"received": ["b1"], "group_a_still_held": True}
    holder.finish()
    # After A's commit: the rest of A (including what arrived meanwhile), then C.
    assert _receive_group(pair)[1] == ["a2", "a3"]
    assert _receive_group(pair)[1] == ["c1"]


def test_a_locked_group_is_not_handed_to_another_transaction_by_any_statement(
    pair: Broker,
) -> None:
    begin_and_send(pair, "a1", "a2", "a3")
    holder = Holder(pair, lambda tx: tx.receive("TargetQueue", top=1))
    group_a = holder.value[0].conversation_group_id
    handle_a = holder.value[0].conversation_handle

    def probe() -> tuple[object, ...]:
        with pair.transaction() as tx:
            return (
                tx.receive("TargetQueue"),
                tx.receive("TargetQueue", conversation_group_id=group_a),
                tx.receive("TargetQueue", conversation_handle=handle_a),
                tx.get_conversation_group("TargetQueue"),
            )

    assert Background(probe).result() == ([], [], [], None)
    holder.finish(commit=False)  # rolled back: a1 is receivable again, first
    assert _receive_group(pair) == (group_a, ["a1", "a2", "a3"])


def test_the_holder_itself_receives_messages_that_arrive_into_its_locked_group(
    pair: Broker,
) -> None:
    handle = begin_and_send(pair, "m0")
    with pair.transaction() as tx:
        assert bodies(tx.receive("TargetQueue")) == ["m0"]
        Background(lambda: send(pair, handle, "m1", "m2")).result()  # arrives meanwhile
        assert bodies(tx.receive("TargetQueue")) == ["m1", "m2"]
        assert tx.receive("TargetQueue") == []
    assert pair.peek("TargetQueue") == []


def test_get_conversation_group_skips_a_locked_group_and_locks_the_next(pair: Broker) -> None:
    begin_and_send(pair, "a1")
    begin_and_send(pair, "b1")
    holder = Holder(pair, lambda tx: tx.get_conversation_group("TargetQueue"))

    def lock_next() -> tuple[str | None, list[str]]:
        with pair.transaction() as tx:
            group = tx.get_conversation_group("TargetQueue")
            return group, bodies(tx.receive("TargetQueue", conversation_group_id=group))

    group_b, got = Background(lock_next).result()
    assert group_b != holder.value and got == ["b1"]
    holder.finish(commit=False)
    assert _receive_group(pair) == (holder.value, ["a1"])


def test_concurrent_reader_threads_never_share_a_group_and_get_every_message_once(
    pair: Broker,
) -> None:
    conversations, per_conversation, readers = 12, 20, 4
    handles = [begin_and_send(pair) for _ in range(conversations)]
    for k in range(per_conversation):
        with pair.transaction() as tx:
            for c, handle in enumerate(handles):
                tx.send(handle, body=f"{c}:{k}")

    held: dict[str, int] = {}
    guard = threading.Lock()
    violations: list[str] = []
    batches: list[tuple[float, list[str]]] = []
    gate = threading.Barrier(readers)

    def reader(me: int) -> Callable[[], None]:
        def run() -> None:
            gate.wait()
            while True:
                with pair.transaction() as tx:
                    got = tx.receive("TargetQueue", top=3, timeout=0.5)
                    at = time.monotonic()
                    if not got:
                        if not pair.peek("TargetQueue"):
                            return
                        continue
                    group = got[0].conversation_group_id
                    with guard:
                        if group in held:
                            violations.append(f"{group} held by {held[group]} and {me}")
                        held[group] = me
                    # Still holding: no other reader may get this group meanwhile.
                    more = tx.receive("TargetQueue", conversation_group_id=group)
                    with guard:  # unmark before COMMIT releases the lock
                        del held[group]
                with guard:
                    batches.append((at, bodies(got + more)))
        return run

    workers = [Background(reader(i), f"reader-{i}") for i in range(readers)]
    for w in workers:
        w.result()
    assert violations == []
    # In the order the RECEIVEs returned, every conversation reads 0, 1, 2, ... exactly once.
    seen: dict[str, list[int]] = {}
    for _, got in sorted(batches):
        for body in got:
            c, k = body.split(":")
            seen.setdefault(c, []).append(int(k))
    assert seen == {str(c): list(range(per_conversation)) for c in range(conversations)}


def test_a_group_held_by_another_process_is_never_handed_out_here(
    pair: Broker, db_path: Path, spawn: Callable[..., Child],
) -> None:
    a = begin_and_send(pair, "a1", "a2")
    begin_and_send(pair, "b1")
    child = spawn("hold-receive", db_path, "TargetQueue", 1)
    held = child.expect("received")
    assert [r["body"] for r in held] == ["a1"]
    group_a = held[0]["group"]

    got_group, got = _receive_group(pair)
    assert got == ["b1"]
    assert got_group != group_a
    assert _receive_group(pair, conversation_group_id=group_a) == (None, [])
    send(pair, a, "a3")  # arrives into the held group meanwhile
    assert _receive_group(pair) == (None, [])

    child.tell("commit")
    child.expect("finished")
    assert child.finish() == 0
    assert _receive_group(pair) == (group_a, ["a2", "a3"])


def test_readers_in_two_processes_each_take_a_different_group(
    pair: Broker, db_path: Path, spawn: Callable[..., Child],
) -> None:
    begin_and_send(pair, "a1")
    begin_and_send(pair, "b1")
    first = spawn("hold-receive", db_path, "TargetQueue")
    got_first = first.expect("received")
    second = spawn("hold-receive", db_path, "TargetQueue")
    got_second = second.expect("received")
    assert sorted(r["body"] for r in got_first + got_second) == ["a1", "b1"]
    assert got_first[0]["group"] != got_second[0]["group"]
    for child in (first, second):
        child.tell("commit")
        child.expect("finished")
        assert child.finish() == 0
    assert pair.peek("TargetQueue") == []


def test_moving_a_conversation_out_of_a_group_another_transaction_holds_is_refused(
    pair: Broker,
) -> None:
    begin_and_send(pair, "x1")
    begin_and_send(pair, "y1")
    holder = Holder(pair, lambda tx: tx.receive("TargetQueue"))
    [x1] = holder.value
    group_y = next(m.conversation_group_id for m in pair.peek("TargetQueue")
                   if m.text() == "y1")

    def move_then_receive() -> list[str]:
        with pytest.raises(CommitConflictError), pair.transaction() as tx:
            tx.move_conversation(x1.conversation_handle, group_y)
        with pair.transaction() as tx:
            return bodies(tx.receive("TargetQueue"))

    # x1 is the holder's: it must not reach a second reader through the other group.
    assert Background(move_then_receive).result() == ["y1"]
    holder.finish()
    assert pair.peek("TargetQueue") == []


def test_moving_a_conversation_into_a_free_group_takes_its_messages_along(
    pair: Broker,
) -> None:
    begin_and_send(pair, "x1", "x2")
    begin_and_send(pair, "y1")
    by_body = {m.text(): m for m in pair.peek("TargetQueue")}
    with pair.transaction() as tx:
        tx.move_conversation(by_body["x1"].conversation_handle,
                             by_body["y1"].conversation_group_id)
    assert _receive_group(pair, conversation_group_id=by_body["y1"].conversation_group_id)[
        1] in (["x1", "x2", "y1"], ["y1", "x1", "x2"])
    assert pair.peek("TargetQueue") == []


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)  # SQLite's own write lock
def test_a_held_group_does_not_keep_the_sqlite_write_lock(pair: Broker, db_path: Path) -> None:
    """Group locks are rows, not an open SQLite transaction: any other writer of the file
    (here a plain sqlite3 connection) gets the write lock while a group is held."""
    begin_and_send(pair, "a1")
    holder = Holder(pair, lambda tx: tx.receive("TargetQueue"))
    other = sqlite3.connect(db_path, timeout=10, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("CREATE TABLE written_while_held (x)")
        other.execute("COMMIT")
    finally:
        other.close()
    assert not holder.finished
    holder.finish()
    assert pair.view("written_while_held") == []
