"""Write ``tests/support/v14_in_flight.sql``: the rows of a SQLite broker database made by
sbroker at schema version 14 (main 921db54) with
work in flight, for ``tests/integration/engine/test_migration_in_flight.py``.

Run with that version's code, e.g.
``git archive 921db54 src | tar -x -C /tmp/v14 && PYTHONPATH=/tmp/v14/src python
tests/support/make_v14_in_flight.py``.

What is in flight when the file is copied (the test relies on these names and bodies):
- TargetQueue: conversation A's a0, a1, a2 (one conversation, one group); conversation D's
  d0, d1 in a group that an open transaction has locked (its RECEIVE never commits);
- InitQueue: the replies b0, b1 and c0, c1 of conversations B and C, one group (C begun
  related to B), queued c0, b0, c1, b1; conversation E's reply e0 and its fired DialogTimer;
  conversation F's timer, due at FakeClock's start + 1000;
- StreamQueue: s0 .. s3 of conversation S, a stream's claim with s0, s1 planned (not
  committed).
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

import sbroker
from sbroker import FakeClock
from sbroker.engine import streams

OUT = Path(__file__).resolve().parent / "v14_in_flight.sql"


def _reply(b: sbroker.Broker, handle: str, *bodies: str) -> None:
    with b.transaction() as tx:
        for body in bodies:
            tx.send(handle, body=body)


def _begin(b: sbroker.Broker, related: str | None = None) -> tuple[str, str]:
    """A dialog whose first message its target received (TargetQueue holds nothing else):
    (initiator, target) handles."""
    with b.transaction() as tx:
        initiator = tx.begin_dialog("InitService", "TargetService", related_conversation=related)
        tx.send(initiator, body="hello")
    with b.transaction() as tx:
        [msg] = tx.receive("TargetQueue")
    return initiator, str(msg.conversation_handle)


def _state(b: sbroker.Broker, clock: FakeClock) -> threading.Event:
    """Everything above; the returned event ends the transaction that holds D's group."""
    b.create_queue("InitQueue")
    b.create_queue("TargetQueue")
    b.create_queue("StreamQueue")
    b.create_service("InitService", "InitQueue")
    b.create_service("TargetService", "TargetQueue", ["DEFAULT"])
    b.create_service("StreamService", "StreamQueue", ["DEFAULT"])
    b_init, b_target = _begin(b)
    _, c_target = _begin(b, related=b_init)
    for target, body in ((c_target, "c0"), (b_target, "b0"), (c_target, "c1"),
                         (b_target, "b1")):
        _reply(b, target, body)
    e_init, e_target = _begin(b)
    _reply(b, e_target, "e0")
    f_init, _ = _begin(b)
    with b.transaction() as tx:
        a = tx.begin_dialog("InitService", "TargetService")
        for body in ("a0", "a1", "a2"):
            tx.send(a, body=body)
    arrived = threading.Event()
    original = b.hooks.arrived

    def spy(queue_ids: Iterable[int]) -> None:
        original(queue_ids)
        arrived.set()

    b.hooks.arrived = spy  # type: ignore[method-assign]
    with b.transaction() as tx:
        tx.begin_conversation_timer(e_init, 10)
        tx.begin_conversation_timer(f_init, 1000)
    clock.advance(11)
    assert arrived.wait(60), "E's timer never fired"
    with b.transaction() as tx:
        s = tx.begin_dialog("InitService", "StreamService")
        for body in ("s0", "s1", "s2", "s3"):
            tx.send(s, body=body)
    source = streams.StreamSource(b, "StreamQueue")
    source.claim(wait=0)
    source.latest(2)
    return _hold_d(b)


def _hold_d(b: sbroker.Broker) -> threading.Event:
    """D's d0, d1 received by a transaction left open in a thread; another commit writes its
    group lock as a row."""
    with b.transaction() as tx:
        d = tx.begin_dialog("InitService", "TargetService")
        tx.send(d, body="d0")
        tx.send(d, body="d1")
    group = _group_of_d(b, d)
    locked, done = threading.Event(), threading.Event()

    def hold() -> None:
        with b.transaction() as tx:
            got = tx.receive("TargetQueue", conversation_group_id=group)
            assert [m.message_body for m in got] == [b"d0", b"d1"]
            locked.set()
            done.wait(60)
            tx.rollback()

    threading.Thread(target=hold, daemon=True).start()
    assert locked.wait(60)
    with b.transaction() as tx:
        tx.begin_dialog("InitService", "TargetService")  # a commit: lazy locks become rows
    return done


def _group_of_d(b: sbroker.Broker, d: str) -> str:
    with b.transaction() as tx:
        [(group,)] = tx.execute(
            "SELECT t.group_id FROM sb_endpoints i JOIN sb_endpoints t"
            " ON t.conversation_id = i.conversation_id AND t.is_initiator = 0"
            " WHERE i.handle = ?", (d,)).fetchall()
    return str(group)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path, copy = Path(tmp) / "v14.db", Path(tmp) / "copy.db"
        clock = FakeClock()
        with sbroker.Broker.open(path, clock=clock, start=True) as b:
            done = _state(b, clock)
            with sqlite3.connect(path) as src, sqlite3.connect(copy) as dst:
                src.backup(dst)
            done.set()
        conn = sqlite3.connect(copy)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 14
        assert conn.execute("SELECT count(*) FROM sb_group_locks").fetchone()[0] == 1
        lines = [line for line in conn.iterdump() if line.startswith(("INSERT INTO", "DELETE"))]
        conn.close()
    OUT.write_text("-- Made by make_v14_in_flight.py: rows only (the schema is migrations"
                   " 1-14).\n" + "\n".join(lines) + "\n", "utf-8")
    print(f"wrote {OUT} ({len(lines)} statements)", file=sys.stderr)


if __name__ == "__main__":
    main()
