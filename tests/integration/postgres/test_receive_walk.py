"""Locks across transactions on PostgreSQL: RECEIVE on a queue whose oldest groups other
transactions hold (sb_lock_next, migration 0009) passes them and takes the oldest free group,
whether the held ones are many short conversations or one long one; a commit locks its
conversations in one order."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

import psycopg
from support.helpers import begin_and_send, bodies

from sbroker import Broker


def _received(tx: object) -> list[str]:
    return bodies(tx.receive("TargetQueue", top=1))  # type: ignore[attr-defined]


def test_readers_pass_the_groups_other_transactions_hold_in_queue_order(
        pg_pair: Broker) -> None:
    for i in range(6):
        begin_and_send(pg_pair, f"c{i}")
    with contextlib.ExitStack() as stack:
        got = []
        for _ in range(6):  # each open transaction holds the group it received from
            tx = stack.enter_context(pg_pair.transaction())
            got.append(_received(tx))
        assert got == [[f"c{i}"] for i in range(6)]
        with pg_pair.transaction() as tx:
            assert _received(tx) == []


def test_a_reader_passes_a_long_held_conversation_to_the_next_group(pg_pair: Broker) -> None:
    """100 ready rows of one held group come first: more than the walk passes one by one
    before it asks PostgreSQL which groups are held."""
    begin_and_send(pg_pair, *(f"long{i}" for i in range(100)))
    begin_and_send(pg_pair, "short")
    with pg_pair.transaction() as holder:
        assert _received(holder) == ["long0"]
        with pg_pair.transaction() as tx:
            assert _received(tx) == ["short"]
        with pg_pair.transaction() as tx:
            assert _received(tx) == []
    with pg_pair.transaction() as tx:
        assert _received(tx) == ["long1"]


def test_a_commit_locks_its_conversations_in_key_order_whatever_order_it_names_them(
        pg_pair: Broker, pg_url: str) -> None:
    """Blocked on its first key, a commit holds none of the later ones: two commits never
    hold each other's conversations while waiting (sb_lock_conversations, migration 0010)."""
    with psycopg.connect(pg_url, autocommit=True) as look:
        keyed = sorted((look.execute("SELECT sb_key(%s)", (c,)).fetchone()[0], c)  # type: ignore[index]
                       for c in ("conversation-a", "conversation-b", "conversation-c"))
        (first, first_id), (_, middle_id), (_, last_id) = keyed
        with psycopg.connect(pg_url, autocommit=True) as holder, \
                psycopg.connect(pg_url, autocommit=True) as committer:
            holder.execute("BEGIN")
            holder.execute("SELECT pg_advisory_xact_lock(1396834306, %s)", (first,))
            pid = committer.info.backend_pid
            worker = threading.Thread(target=_lock_all, args=(committer, [
                last_id, middle_id, first_id]))
            worker.start()
            try:
                _until(lambda: look.execute(
                    "SELECT 1 FROM pg_locks WHERE pid = %s AND NOT granted", (pid,)).fetchone())
                held = {row[0] for row in look.execute(
                    "SELECT key FROM sb_advisory_locks WHERE pid = %s", (pid,))}
                assert held == set(), held  # waiting for the first key, holding no later one
            finally:
                holder.execute("ROLLBACK")
                worker.join(10)
    assert not worker.is_alive()


def _lock_all(conn: psycopg.Connection[object], ids: list[str]) -> None:
    conn.execute("BEGIN")
    conn.execute("SELECT sb_lock_conversations(%s::text[])", (ids,))
    conn.execute("ROLLBACK")


def _until(condition: Callable[[], object], timeout: float = 10.0) -> None:
    """Poll the database until ``condition`` holds (it is what says the commit waits)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the commit never waited for its first key"
        time.sleep(0.01)
