"""The receiver's whole-batch statements, on a real database: endpoints read in one step
(REAL columns exact), queue rows inserted many per statement, receive_seq set in one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import sbroker
from sbroker.engine import endpoints as dialogs
from sbroker.services.network import batch


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[sbroker.Broker]:
    b = sbroker.Broker.open(tmp_path / "b.db")
    b.create_queue("q")
    b.create_service("S", "q", ["DEFAULT"])
    b.create_service("T", "q", ["DEFAULT"])
    yield b
    b.close()


def _endpoints(b: sbroker.Broker, n: int) -> list[dialogs.Endpoint]:
    with b.transaction() as tx:
        handles = [tx.begin_dialog("S", "T") for _ in range(n)]
    with b.db.connection() as conn:
        conn.execute("UPDATE sb_endpoints SET lifetime_expires = 1732281234.5678901,"
                     " timer_at = 0.1 + conv_order WHERE handle = ?", (handles[0],))
        eps = [dialogs.load_endpoint(conn, h) for h in handles]
    return [ep for ep in eps if ep is not None]


def test_endpoints_come_back_exactly_as_one_by_one(broker: sbroker.Broker) -> None:
    eps = _endpoints(broker, 3)
    keys = {(ep.conversation_id, ep.is_initiator) for ep in eps}
    missing = ("00000000-0000-0000-0000-000000000000", False)
    with broker.db.connection() as conn:
        got = batch.load_endpoints(conn, keys | {missing})
    assert got[missing] is None
    assert {k: v for k, v in got.items() if v is not None} == {
        (ep.conversation_id, ep.is_initiator): ep for ep in eps}
    assert got[(eps[0].conversation_id, True)].lifetime_expires == 1732281234.5678901  # type: ignore[union-attr]


def test_many_rows_in_one_insert_and_receive_seqs_in_one_update(
        broker: sbroker.Broker) -> None:
    ep = _endpoints(broker, 2)[1]
    rows = [(ep.queue_id, ep.group_id, ep.handle, ep.conv_order, i, 1, 5, 0, "DEFAULT", "N",
             bytes([i]) * i, f"id-{i}", "S", "DEFAULT", 1732281234.5678901 + i,
             None if i % 2 else f"00-{i:032x}-{i:016x}-01")
            for i in range(7)]
    with broker.db.connection() as conn:
        batch.insert_messages(conn, rows)
        batch.set_receive_seqs(conn, {ep.handle: 7})
        stored = conn.execute("SELECT msn, body, message_id, enqueued_at, trace_context"
                              " FROM sb_messages ORDER BY queuing_order").fetchall()
        seq = conn.execute("SELECT receive_seq FROM sb_endpoints WHERE handle = ?",
                           (ep.handle,)).fetchone()[0]
    assert stored == [row[4:5] + row[10:12] + row[14:] for row in rows]
    assert seq == 7
