"""`python -m bench.pgstatements`: where a transaction's time goes on PostgreSQL, statement
by statement, beside the raw SKIP LOCKED peer's whole transaction in the same run.

``python -m bench.pgstatements [-n 20000] [-k 100] [--runs 3]``

A throwaway server is started with ``pg_stat_statements`` (``track = all``, so the statements
inside sbroker's PL/pgSQL functions count too, and ``track_planning = on``).  Each run sends
``-n`` messages ``-k`` per transaction on 100 dialogs of a fresh broker database, then
receives them ``-k`` at a time (W2's shape with the defaults; ``-k 1`` is W1's), and the
raw peer does the same on its table.  Printed, per phase:

- the wall time per transaction of sbroker and of the peer (medians of ``--runs``);
- from the last run, each of sbroker's statements' server time per transaction (execution
  and planning), top-level statements marked; nested ones (inside functions) are part of
  their caller's; and the peer's top-level statements' time per transaction.

- the CPU time per transaction of the client (the thread that runs the transactions) and of
  the server (every process of it: parsing, planning, executing, committing), medians of
  ``--runs``.  On one machine the two take turns: a transaction's wall time is about their
  sum.

The server's execution of sbroker's top-level statements against the peer's whole
transaction says how far the statements alone can go: when they already take the peer's
time, no Python makes up for it.  The client's CPU against the peer's says what is left to
win in Python.  Durability "normal" (synchronous_commit=off), fsync=on.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.systems.postgres import SCHEMA, PostgresClient
from bench.workloads import body
from tools import pgserver

CONVERSATIONS = 100
Phase = Callable[[int], int]
"""Moves ``n`` messages; returns how many transactions it took."""
STATS = """
SELECT toplevel, calls, total_exec_time, total_plan_time,
       left(regexp_replace(query, '\\s+', ' ', 'g'), 90)
FROM pg_stat_statements
WHERE calls > 0 AND query !~* 'pg_stat_statements|^(BEGIN|COMMIT)'
ORDER BY total_exec_time + total_plan_time DESC LIMIT %s
"""


def _sbroker_phases(url: str, n: int, k: int) -> tuple[Phase, Phase, Callable[[], None]]:
    import sbroker

    b = sbroker.Broker.open(url)
    b.create_queue("I")
    b.create_queue("T")
    b.create_service("IS", "I")
    b.create_service("TS", "T", ["DEFAULT"])
    with b.transaction() as tx:
        handles = [tx.begin_dialog("IS", "TS") for _ in range(CONVERSATIONS)]
    bodies = [body(i, 200) for i in range(n)]

    def send(count: int) -> int:
        for start in range(0, count, k):
            with b.transaction() as tx:
                for i in range(start, min(start + k, count)):
                    tx.send(handles[i % CONVERSATIONS], "DEFAULT", bodies[i % n])
        return -(-count // k)

    def receive(count: int) -> int:
        got = transactions = 0
        while got < count:
            with b.transaction() as tx:
                taken = tx.receive("T", top=k, timeout=1)
            if not taken:
                raise RuntimeError(f"sbroker: {count - got} messages missing")
            got += len(taken)
            transactions += 1
        return transactions

    return send, receive, b.close


def _peer_phases(dsn: str, n: int, k: int) -> tuple[Phase, Phase, Callable[[], None]]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA.format(t="peer_queue"))
    client = PostgresClient(dsn, "peer_queue", "normal")
    bodies = [body(i, 200) for i in range(n)]

    def send(count: int) -> int:
        for start in range(0, count, k):
            chunk = bodies[start:min(start + k, count)]
            if k == 1:
                client.send_one(chunk[0])
            else:
                client.send_batch(chunk)
        return -(-count // k)

    def receive(count: int) -> int:
        got = transactions = 0
        while got < count:
            taken = client.receive_batch(k, 1.0)
            if not taken:
                raise RuntimeError(f"peer: {count - got} messages missing")
            got += len(taken)
            transactions += 1
        return transactions

    def close() -> None:
        client.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP TABLE peer_queue; DROP FUNCTION peer_queue_notify()")

    return send, receive, close


def _sql(dsn: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(statement)


def _statements(dsn: str, transactions: int, limit: int) -> list[tuple[Any, ...]]:
    import psycopg

    time.sleep(0.5)  # the statistics of the last statements reach the collector
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(STATS, (limit,)).fetchall()
        conn.execute("SELECT pg_stat_statements_reset()")
    return [(top, calls / transactions, exec_ms * 1000 / transactions,
             plan_ms * 1000 / transactions, text)
            for top, calls, exec_ms, plan_ms, text in rows]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.pgstatements", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=20_000, help="messages per run (default 20,000)")
    p.add_argument("-k", type=int, default=100, help="messages per transaction (default 100)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--top", type=int, default=12, help="statements shown per phase")
    args = p.parse_args(argv)
    n, k = args.n - args.n % args.k, args.k
    console = Console(width=150)
    wall: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[tuple[float, float]]] = {}
    statements: dict[str, list[tuple[Any, ...]]] = {}
    with pgserver.PostgresServer(prefix="sbroker-bench-stmts-", settings={
            "shared_preload_libraries": "pg_stat_statements",
            "pg_stat_statements.track": "all", "pg_stat_statements.track_planning": "on"},
            ) as server:
        _sql(server.dsn("template1"), "CREATE EXTENSION pg_stat_statements")  # every new db
        for run in range(1, args.runs + 1):
            for system in ("sbroker", "raw postgres"):
                dbname = f"stmts_{run}_{system.split()[0]}"
                url = server.create_database(dbname)
                dsn = server.dsn(dbname)
                send, receive, close = (_sbroker_phases(url, n, k) if system == "sbroker"
                                        else _peer_phases(dsn, n, k))
                try:
                    for phase, fn in (("send", send), ("receive", receive)):
                        _sql(dsn, "SELECT pg_stat_statements_reset()")
                        client_at, server_at = time.thread_time(), server.cpu_seconds()
                        start = time.perf_counter()
                        transactions = fn(n)
                        seconds = time.perf_counter() - start
                        client = (time.thread_time() - client_at) / transactions
                        served = (server.cpu_seconds() - server_at) / transactions
                        wall.setdefault((system, phase), []).append(seconds / transactions)
                        cpu.setdefault((system, phase), []).append((client, served))
                        console.print(f"run {run}/{args.runs} {system:>12} {phase:>7}:"
                                      f" {n / seconds:>9,.0f} msgs/s,"
                                      f" {seconds / transactions * 1e6:>7,.0f} µs per"
                                      f" transaction; CPU µs per transaction: client"
                                      f" {client * 1e6:,.0f}, server {served * 1e6:,.0f}")
                        if run == args.runs:
                            statements[f"{system} {phase}"] = _statements(
                                dsn, transactions, args.top)
                finally:
                    close()
    for phase in ("send", "receive"):
        ours = statistics.median(wall[("sbroker", phase)]) * 1e6
        peer = statistics.median(wall[("raw postgres", phase)]) * 1e6
        top_exec = sum(row[2] for row in statements[f"sbroker {phase}"] if row[0])
        peer_exec = sum(row[2] for row in statements[f"raw postgres {phase}"] if row[0])
        table = Table(title=f"{phase}, up to {k} per transaction ({n:,} msgs, median of"
                            f" {args.runs}): sbroker {ours:,.0f} µs per transaction, raw"
                            f" postgres {peer:,.0f}. On the server, sbroker's top-level"
                            f" statements run {top_exec:,.0f} µs per transaction"
                            f" ({top_exec / peer:.2f}x the peer's whole transaction), the"
                            f" peer's {peer_exec:,.0f} µs", title_justify="left")
        for col in ("level", "calls / tx", "run µs / tx", "plan µs / tx"):
            table.add_column(col, justify="left" if col == "level" else "right")
        table.add_column("statement", no_wrap=True, overflow="ellipsis", max_width=90)
        for top, calls, run_us, plan_us, text in statements[f"sbroker {phase}"]:
            table.add_row("top" if top else "  nested", f"{calls:,.1f}", f"{run_us:,.0f}",
                          f"{plan_us:,.0f}", text)
        console.print(table)
        (ours_client, ours_server), (peer_client, peer_server) = (
            [statistics.median(v) * 1e6 for v in zip(*cpu[(system, phase)], strict=True)]
            for system in ("sbroker", "raw postgres"))
        console.print(f"{phase}: CPU µs per transaction (median of {args.runs}): client"
                      f" sbroker {ours_client:,.0f}, raw postgres {peer_client:,.0f};"
                      f" server sbroker {ours_server:,.0f}, raw postgres {peer_server:,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
