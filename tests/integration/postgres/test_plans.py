"""The plans PostgreSQL keeps for sbroker's hot statements stay good as the tables grow.

A connection prepares the statements of every send and RECEIVE once (connection.py), and
PL/pgSQL keeps its functions' plans for the session: a plan made while a queue was empty is
still run when it holds thousands of rows. These tests look at those plans on a queue that
has grown since they were made, the way an application that started small would.
"""

from __future__ import annotations

import json
import re
from typing import Any

import psycopg
import pytest
from support.helpers import make_pair

import sbroker
from sbroker.storage.postgres.connection import PREPARE_ALL, PREPARED

SAMPLES = {
    "sb_ready_senders": ("'[1, 2, 3]'",),
    "sb_lock_conversations": ("'[\"C1\"]'",),
    "sb_insert_message": ("2", "'G'", "'H'", "1", "1", "1", "5", "0", "'DEFAULT'", "'NONE'",
                          "'\\x00'::bytea", "'M'", "'TS'", "'DEFAULT'", "0", "NULL"),
    "sb_insert_messages_json": ("'[]'", "'\\x00'::bytea"),
    "sb_set_send_seq": ("1", "2"),
    "sb_receive_take_next": ("2", "10", "'[]'"),
    "sb_receive_fetch": ("2", "'G'", "10"),
    "sb_receive_fetch_handle": ("2", "'G'", "'H'", "10"),
    "sb_reset_rollback_count": ("2",),
    "sb_consume": ("'{\"1\": \"M\"}'", "2"),
    "sb_set_send_seqs_bulk": ("'{\"1\": 2}'", "'[1]'"),
    "sb_send_direct": ("'DEFAULT'", "'NONE'", "'\\x00'::bytea", "'M'", "0", "1", "'H'", "2",
                       "'0'", "NULL"),
    "sb_send_direct_many": ("'[[1, 2, \"DEFAULT\", \"NONE\", \"M\", 1, 1]]'", "'\\x00'::bytea",
                            "0", "'0'"),
}

GROWING = re.compile(r"Seq Scan on (sb_messages|sb_endpoints|sb_transmission_queue)\b")
"""The tables that grow with the work (the catalog's few rows are read whole, rightly)."""


def _grown(pg_url: str, messages: int = 2000) -> sbroker.Broker:
    """A broker whose TargetQueue holds ``messages`` on 50 conversations."""
    b = make_pair(sbroker.Broker.open(pg_url))
    with b.transaction() as tx:
        handles = [tx.begin_dialog("InitService", "TargetService") for _ in range(50)]
    _send(b, handles, messages)
    return b


def _send(b: sbroker.Broker, handles: list[str], messages: int) -> None:
    for start in range(0, messages, 100):
        with b.transaction() as tx:
            for i in range(start, start + 100):
                tx.send(handles[i % len(handles)], body=b"x" * 50)


def test_every_prepared_statement_has_a_sample() -> None:
    assert set(SAMPLES) == set(PREPARED.values())


def test_the_generic_plan_of_every_prepared_statement_reads_tables_by_key(
        pg_url: str) -> None:
    """Planned for any parameters (as a prepared statement may be), no hot statement reads
    a whole table: each finds its rows through an index."""
    _grown(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ANALYZE")
        psycopg.ClientCursor(conn).execute(PREPARE_ALL)
        conn.execute("SET plan_cache_mode = force_generic_plan")
        for name, args in SAMPLES.items():
            plan = "\n".join(row[0] for row in conn.execute(
                f"EXPLAIN EXECUTE {name}({', '.join(args)})"))
            assert not GROWING.search(plan), f"{name}:\n{plan}"


def _nested_plans(conn: psycopg.Connection[Any]) -> list[str]:
    """auto_explain's plans of the statements run inside functions, sent to this client."""
    plans: list[str] = []
    conn.add_notice_handler(lambda d: plans.append(d.message_primary or ""))
    conn.execute("LOAD 'auto_explain'")
    for setting in ("auto_explain.log_min_duration = 0",
                    "auto_explain.log_nested_statements = on", "client_min_messages = log"):
        conn.execute(f"SET {setting}")
    return plans


@pytest.mark.parametrize("function", ["sb_consume", "sb_ready_senders", "sb_set_send_seqs",
                                      "sb_send_direct", "sb_send_direct_many"])
def test_a_function_planned_on_a_small_queue_reads_the_grown_queue_by_key(
        pg_url: str, function: str) -> None:
    """The session's plan of these functions, made while the queue and the conversations
    were few, still finds rows through an index once they are many. The transmission queue is
    analyzed while empty first: a sequential scan of it then looks cheapest, and a plan that
    takes one (kept for the session) would read the whole queue once it grew."""
    b = _grown(pg_url, messages=100)
    try:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            [(order, message_id, conv_order)] = conn.execute(
                "SELECT m.queuing_order, m.message_id, e.conv_order FROM sb_messages m"
                " JOIN sb_endpoints e ON e.handle = m.handle LIMIT 1").fetchall()
            [(sender, handle, version)] = conn.execute(  # the peer of conv_order
                "SELECT s.conv_order, s.handle, m.value FROM sb_endpoints s, sb_endpoints p,"
                " sb_meta m WHERE p.conv_order = %s AND s.conversation_id = p.conversation_id"
                " AND s.is_initiator = 1 - p.is_initiator AND m.key = 'catalog_version'",
                (conv_order,)).fetchall()
            statement = {
                "sb_consume": ("SELECT sb_consume(%s::jsonb, 2)",
                               (json.dumps({str(order): message_id}),)),
                "sb_ready_senders": ("SELECT * FROM sb_ready_senders(ARRAY[%s]::bigint[])",
                                     (conv_order,)),
                "sb_set_send_seqs": ("SELECT sb_set_send_seqs(%s::jsonb, ARRAY[%s]::bigint[])",
                                     (json.dumps({str(conv_order): 7}), conv_order)),
                "sb_send_direct": (
                    "SELECT sb_send_direct('DEFAULT', 'N', '\\x00'::bytea, 'M', 0, %s, %s,"
                    " %s, %s, NULL)", (sender, handle, conv_order, version)),
                "sb_send_direct_many": (
                    "SELECT sb_send_direct_many(%s::jsonb, '\\x00'::bytea, 0, %s)",
                    (json.dumps([[sender, conv_order, "DEFAULT", "N", "M", 1, 1]]), version)),
            }[function]
            conn.execute("ANALYZE sb_transmission_queue")  # empty: a seq scan looks cheapest
            for _ in range(8):  # PL/pgSQL settles on a plan after five calls
                conn.execute("BEGIN")
                conn.execute(*statement)
                conn.execute("ROLLBACK")
            with b.transaction() as tx:
                handles = [tx.begin_dialog("InitService", "TargetService")
                           for _ in range(500)]
            _send(b, handles, 5000)
            plans = _nested_plans(conn)
            conn.execute("BEGIN")
            conn.execute(*statement)
            conn.execute("ROLLBACK")
    finally:
        b.close()
    nested = "\n".join(plans)
    assert "Index Scan" in nested, nested
    assert not GROWING.search(nested), nested


def test_a_rolled_back_transaction_leaves_the_prepared_statements_in_place(
        pg_url: str) -> None:
    """A small pool: RECEIVE, ROLLBACK, and the same connections receive again."""
    b = _grown(pg_url + "?pool_max=2", messages=100)
    try:
        for _ in range(3):
            tx = b.transaction()
            assert tx.receive("TargetQueue")
            tx.rollback()
        with b.transaction() as tx:
            assert tx.receive("TargetQueue")
    finally:
        b.close()


def test_statements_the_application_deallocates_are_prepared_again(pg_url: str) -> None:
    """DEALLOCATE ALL in a transaction fails that transaction's RECEIVE; the next works."""
    b = _grown(pg_url + "?pool_max=2", messages=100)
    try:
        tx = b.transaction()
        tx.execute("DEALLOCATE ALL")
        with pytest.raises(psycopg.errors.InvalidSqlStatementName):
            tx.receive("TargetQueue")
        tx.rollback()
        with b.transaction() as tx:
            assert tx.receive("TargetQueue")
    finally:
        b.close()


def test_a_commit_of_several_sends_reads_only_the_endpoints_it_names(pg_url: str) -> None:
    """sb_send_direct_many's session plan, made while the conversations were few, finds each
    call's senders and peers by key once they are many (migration 0018): no step of it over
    sb_endpoints returns more rows than the call names. Before, a hash join read the whole
    table through its primary key at every commit of several SENDs."""
    b = _grown(pg_url, messages=100)
    try:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            [(sender, peer, version)] = conn.execute(
                "SELECT s.conv_order, p.conv_order, m.value FROM sb_endpoints s, sb_endpoints p,"
                " sb_meta m WHERE s.is_initiator = 1 AND p.conversation_id = s.conversation_id"
                " AND p.is_initiator = 0 AND m.key = 'catalog_version' LIMIT 1").fetchall()
            call = ("SELECT sb_send_direct_many(%s::jsonb, '\\x00'::bytea, 0, %s)",
                    (json.dumps([[sender, peer, "DEFAULT", "N", "M", 1, 1]]), version))
            conn.execute("ANALYZE sb_endpoints")
            for _ in range(8):  # PL/pgSQL settles on a plan after five calls
                conn.execute("BEGIN")
                assert conn.execute(*call).fetchone() == (1,)
                conn.execute("ROLLBACK")
            with b.transaction() as tx:
                for _ in range(1000):
                    tx.begin_dialog("InitService", "TargetService")
            conn.execute("ANALYZE sb_endpoints")
            [(endpoints,)] = conn.execute("SELECT count(*) FROM sb_endpoints").fetchall()
            plans = _nested_plans(conn)
            for setting in ("auto_explain.log_analyze = on", "auto_explain.log_timing = off"):
                conn.execute(f"SET {setting}")
            conn.execute("BEGIN")
            assert conn.execute(*call).fetchone() == (1,)
            conn.execute("ROLLBACK")
    finally:
        b.close()
    nested = "\n".join(plans)
    read = [int(n) for n in re.findall(r" on sb_endpoints\b.*\(actual rows=(\d+) ", nested)]
    assert endpoints > 1000 and read, nested
    assert max(read) <= 2, nested
