"""The RECEIVE statements walk an index in RECEIVE order and never sort (a sort would read
every ready row of the queue on each RECEIVE)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import sbroker
from sbroker.storage.sqlite.connection import BACKEND, SQL


def _plan(conn: sqlite3.Connection, sql: str, args: tuple[object, ...]) -> list[str]:
    return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, args)]


@pytest.mark.parametrize(("sql", "args"), [
    (SQL.receive_take_next, (1, 1, "owner", 1)),
    (BACKEND.receive_take_excluding, (1, 1, "owner", "[1, 2]", '["g"]', 1)),
    (SQL.receive_candidate, (1, 1, 1, "owner", "[]", "[]")),
    (SQL.receive_fetch, ("group", 1)),
    (SQL.receive_fetch_handle, ("group", "handle", 1)),
])
def test_receive_statements_use_an_index_and_never_sort(db_path: Path, sql: str,
                                                        args: tuple[object, ...]) -> None:
    sbroker.Broker.open(db_path).close()
    with sqlite3.connect(db_path) as conn:
        plan = _plan(conn, sql, args)
    assert not [step for step in plan if "TEMP B-TREE" in step], plan
    assert any("sb_messages_ready" in s or "sb_messages_group" in s for s in plan), plan


def test_a_direct_send_finds_both_endpoints_by_rowid(db_path: Path) -> None:
    sbroker.Broker.open(db_path).close()
    with sqlite3.connect(db_path) as conn:
        plan = _plan(conn, SQL.send_direct, (0, "T", "N", b"x", "id", 1.0, None, 1, "h", 2,
                                            "0"))
        plan += _plan(conn, SQL.bump_send_seq, (1, 1))
    assert not [step for step in plan if step.startswith("SCAN")], plan
    assert sum("INTEGER PRIMARY KEY" in step for step in plan) == 3, plan


def test_the_order_among_equal_priorities_is_the_queuing_order(pair: sbroker.Broker) -> None:
    with pair.transaction() as tx:
        handles = [tx.begin_dialog("InitService", "TargetService") for _ in range(30)]
    for i, h in enumerate(reversed(handles)):  # queued in the opposite order of the groups
        with pair.transaction() as tx:
            tx.send(h, "DEFAULT", str(i))
    got = []
    while True:
        with pair.transaction() as tx:
            msgs = tx.receive("TargetQueue")
        if not msgs:
            break
        got += [m.text() for m in msgs]
    assert got == [str(i) for i in range(30)]
