"""`python -m bench.pgsendparts`: what each part of W2's SEND costs PostgreSQL's server
(issue 40), measured paired on one server.

``python -m bench.pgsendparts [-n 20000] [--rounds 3] [--variants "today,no stream index"]
[--endpoints 2000]``

Each variant is a broker database made the ordinary way (100 conversing dialogs, as
bench.floor makes them) with one change to what ``sb_send_direct_many`` (its newest migration)
writes or reads, and each is sent W2's commits: 100 messages over the 100 dialogs, BEGIN, the
prepared call and COMMIT in one simple query, as the engine sends them. The variants take
turns transaction by transaction, each on a connection of its own, so that the load of a
shared machine falls on them alike; a variant's figure is its backend's CPU time per
transaction (``/proc/<pid>/schedstat``: the backend alone, not the WAL writer's or another
client's), median of ``--rounds`` (each round on fresh databases). Durability "normal"
(synchronous_commit=off). Variants:

- ``today``: the function as it is;
- ``call only``: a function that returns at once (parsing the call's text and its JSON and
  bytea literals, the call, BEGIN and COMMIT: the floor of any function);
- ``no stream index``: without the partial index of rows a stream has yet to number
  (sb_messages_unnumbered, migration 4);
- ``send_seq apart``: each sender's next msn kept in a narrow table of its own
  (conv_order, send_seq) instead of the wide sb_endpoints row;
- ``integer group key``: the group index (RECEIVE's order in a group) led by an integer
  key of the group instead of its text id;
- ``all three``: the three above together;
- ``nested loops``: the function's plans made without hash or merge joins.

``--endpoints N`` gives each database N endpoints in all: the 200 of the 100 dialogs that
send, and idle conversing ones (copies of theirs under new ids) that never do. The plans of
``sb_send_direct_many`` are generic (planned once per session, for a call of 100 rows): how
they join a call's rows to sb_endpoints depends on how many endpoints the planner sees.

Each changed variant is checked like today's: every message in, each dialog's numbered on.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from bench import leanpg
from bench.workloads import body
from tools import pgserver

BATCH = 100
PREPARE_SEND = ("PREPARE send(jsonb, bytea, double precision, text) AS"
                " SELECT n FROM sb_send_direct_many($1, $2, $3, $4) n WHERE n IS NOT NULL")
FUNCTION = " FUNCTION sb_send_direct_many("

CALL_ONLY = """CREATE OR REPLACE FUNCTION sb_send_direct_many(p_rows jsonb, p_bodies bytea,
    p_now double precision, p_version text) RETURNS integer
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off SET plan_cache_mode = force_generic_plan
AS $$ BEGIN RETURN jsonb_array_length(p_rows); END $$"""
NO_STREAM_INDEX = ["DROP INDEX sb_messages_unnumbered"]
SEQS_APART = [
    "CREATE TABLE bench_send_seqs (conv_order bigint PRIMARY KEY, send_seq bigint NOT NULL)",
    "INSERT INTO bench_send_seqs SELECT conv_order, send_seq FROM sb_endpoints"]
SEQS_EDITS = {
    "s.send_seq + r.k": "q.send_seq + r.k",
    "(SELECT * FROM sb_endpoints x WHERE x.conv_order = r.sender LIMIT 1) s":
        "(SELECT * FROM bench_send_seqs x WHERE x.conv_order = r.sender LIMIT 1) q",
    "UPDATE sb_endpoints e SET send_seq": "UPDATE bench_send_seqs e SET send_seq"}
GROUP_KEY = [
    "ALTER TABLE sb_messages ADD COLUMN group_key integer",
    "DROP INDEX sb_messages_group",
    "CREATE INDEX sb_messages_group ON sb_messages"
    "(group_key, status, priority DESC, conv_order, is_timer DESC, msn)"]
GROUP_KEY_EDITS = {
    "INSERT INTO sb_messages(queue_id,": "INSERT INTO sb_messages(group_key, queue_id,",
    "SELECT p.queue_id, p.group_id,": "SELECT sb_key(p.group_id), p.queue_id, p.group_id,"}


NESTED_LOOPS = {"SET enable_seqscan = off":
                "SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off"}
ENDPOINT_COLUMNS = ("handle, conversation_id, is_initiator, group_id, queue_id, service,"
                    " far_service, far_broker_instance, contract, state, priority, send_seq,"
                    " receive_seq, lifetime_expires, timer_at, created_at, closed_at,"
                    " delete_after, encryption")


def _today() -> str:
    """sb_send_direct_many as the newest migration that makes it has it, to be edited: as
    CREATE OR REPLACE, to the end of that migration."""
    from sbroker.storage.migrate import migrations

    text = next(m.text for m in reversed(migrations("sbroker.storage.postgres"))
                if FUNCTION in m.text)
    return "CREATE OR REPLACE" + text[text.index(FUNCTION):]


def _edited(edits: dict[str, str]) -> str:
    function = _today()
    for old, new in edits.items():
        if old not in function:
            raise ValueError(f"sb_send_direct_many no longer has {old!r}: update this bench")
        function = function.replace(old, new)
    return function


def variants() -> dict[str, list[str]]:
    """Each variant's statements, run on a fresh broker database before it sends."""
    return {
        "today": [],
        "call only": [CALL_ONLY],
        "no stream index": NO_STREAM_INDEX,
        "send_seq apart": [*SEQS_APART, _edited(SEQS_EDITS)],
        "integer group key": [*GROUP_KEY, _edited(GROUP_KEY_EDITS)],
        "all three": [*NO_STREAM_INDEX, *SEQS_APART, *GROUP_KEY,
                      _edited({**SEQS_EDITS, **GROUP_KEY_EDITS})],
        "nested loops": [_edited(NESTED_LOOPS)],
    }


def add_endpoints(url: str, total: int) -> None:
    """Idle conversing endpoints, copies of the 100 dialogs' under new ids, until the database
    holds ``total`` (a multiple of its dialogs' endpoints, rounded down; never fewer)."""
    import psycopg

    renamed = ENDPOINT_COLUMNS.replace("handle,", "handle || '-' || g,").replace(
        "conversation_id,", "conversation_id || '-' || g,").replace(
        " group_id,", " group_id || '-' || g,")
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM sb_endpoints").fetchone()
        assert row is not None
        copies = total // row[0] - 1
        if copies > 0:
            conn.execute(f"INSERT INTO sb_endpoints({ENDPOINT_COLUMNS}) SELECT {renamed}"
                         " FROM sb_endpoints, generate_series(1, %s) g", (copies,))
        conn.execute("ANALYZE sb_endpoints")


@dataclass
class Sender:
    """One variant's database, connection and dialogs, and the CPU its backend spent."""

    name: str
    url: str
    conn: Any
    pairs: list[tuple[int, int]]
    version: str
    pid: int
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    cpu: float = 0.0
    commits: int = 0


def backend_cpu(pid: int) -> float:
    """CPU seconds a server process has run (Linux's schedstat: nanoseconds)."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0]) / 1e9


def _sender(server: pgserver.PostgresServer, name: str, statements: list[str], dbname: str,
            template: str, made: tuple[list[tuple[int, int]], str]) -> Sender:
    """A copy of the broker database ``template`` with the variant's statements run."""
    import psycopg

    url = server.create_database(dbname, template=template)
    with psycopg.connect(url, autocommit=True) as setup:
        for statement in statements:
            setup.execute(statement)
        setup.execute("ANALYZE")
    conn = psycopg.connect(url, autocommit=True, cursor_factory=psycopg.ClientCursor)
    conn.execute(PREPARE_SEND)
    conn.execute("SET synchronous_commit = off")
    pairs, version = made
    return Sender(name, url, conn, pairs, version, conn.info.backend_pid)


def send_rows(pairs: list[tuple[int, int]], ids: Iterator[int], bodies: list[bytes],
              start: int, k: int) -> tuple[str, bytes]:
    """sb_send_direct_many's rows for messages ``start .. start+k`` over ``pairs`` (JSON
    text, as the engine's) and their bodies joined."""
    rows, chunk, offset = [], [], 1
    for i in range(start, start + k):
        sender, peer = pairs[i % len(pairs)]
        b = bodies[i % len(bodies)]
        rows.append([sender, peer, "DEFAULT", "N", f"{next(ids):032X}", offset, len(b)])
        chunk.append(b)
        offset += len(b)
    return json.dumps(rows), b"".join(chunk)


def send_commit(conn: Any, name: str, text: str, joined: bytes, version: str) -> None:
    """BEGIN, the prepared call (PREPARE_SEND) and COMMIT in one simple query, as the engine
    sends them; raises if the function wrote nothing."""
    cur = conn.execute("BEGIN; EXECUTE send(%s, %s, %s, %s); COMMIT",
                       (text, joined, time.time(), version))
    if cur.nextset() and cur.fetchone() is None:
        raise AssertionError(f"{name}: the SEND wrote nothing")


def _commit(s: Sender, j: int, bodies: list[bytes]) -> None:
    """One commit of BATCH messages, the engine's way; its backend's CPU is counted."""
    text, joined = send_rows(s.pairs, s.ids, bodies, j, BATCH)
    before = backend_cpu(s.pid)
    send_commit(s.conn, s.name, text, joined, s.version)
    s.cpu += backend_cpu(s.pid) - before
    s.commits += 1


def _check(s: Sender, n: int) -> None:
    """Every message in, each dialog's numbered on by as many (call only writes nothing)."""
    import psycopg

    if s.name == "call only":
        return
    with psycopg.connect(s.url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*), count(DISTINCT (conv_order, msn))"
                           " FROM sb_messages WHERE status = 1").fetchone()
    assert row is not None and row[0] == row[1] == n, (s.name, row, n)


def run(server: pgserver.PostgresServer, n: int, rounds: int,
        names: list[str], endpoints: int = 0) -> dict[str, list[float]]:
    """Backend CPU µs per commit of each variant, one figure per round, on ``server``."""
    chosen = {name: variants()[name] for name in names}
    bodies = [body(i, 200) for i in range(1000)]
    figures: dict[str, list[float]] = {name: [] for name in chosen}
    tag = uuid.uuid4().hex[:8]
    for r in range(rounds):
        base = f"sendparts_{tag}_{r}"
        url = server.create_database(base)
        made = leanpg.broker(url)  # copied for each variant
        add_endpoints(url, endpoints)
        senders = [_sender(server, name, statements, f"{base}_{k}", base, made)
                   for k, (name, statements) in enumerate(chosen.items())]
        try:
            for t, j in enumerate(range(0, n, BATCH)):
                for s in senders if t % 2 == 0 else senders[::-1]:
                    _commit(s, j, bodies)
        finally:
            for s in senders:
                s.conn.close()
        for s in senders:
            _check(s, n)
            figures[s.name].append(s.cpu / s.commits * 1e6)
    return figures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.pgsendparts", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=20_000, help="messages per variant and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--variants", default=",".join(variants()),
                   help="comma-separated, of: " + ", ".join(variants()))
    p.add_argument("--endpoints", type=int, default=0,
                   help="endpoints in each database, idle ones added to the 200 that send")
    args = p.parse_args(argv)
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in variants()]
    if unknown:
        p.error(f"unknown variant {unknown[0]!r}: choose from {', '.join(variants())}")
    n = max(BATCH, args.n - args.n % BATCH)
    with pgserver.PostgresServer(prefix="sbroker-bench-sendparts-") as server:
        figures = run(server, n, args.rounds, names, args.endpoints)
    base = statistics.median(figures["today"]) if "today" in figures else None
    table = Table(title=f"W2 send, {n:,} messages {BATCH} per commit, {max(args.endpoints, 200):,}"
                        f" endpoints: the server backend's CPU µs per commit, median of"
                        f" {args.rounds}", title_justify="left")
    for col in ("variant", "µs / commit", "rounds", "vs today"):
        table.add_column(col, justify="left" if col == "variant" else "right")
    for name, values in figures.items():
        median = statistics.median(values)
        table.add_row(name, f"{median:,.0f}", " ".join(f"{v:,.0f}" for v in values),
                      f"{median - base:+,.0f}" if base is not None else "")
    Console(width=150).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
