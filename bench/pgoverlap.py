"""`python -m bench.pgoverlap`: the floor of a PostgreSQL SEND commit whose client work
overlaps the server's, the design proposed where issue 40 ended, measured before it is built.

``python -m bench.pgoverlap [-n 20000] [--rounds 3] [--client-us 27] [--chunks 10,25]``

Today the engine makes a whole commit's SENDs in Python (about 2,600-2,900 µs per commit of
100, stop 47's ``bench.pgstatements``) and ships them at COMMIT in one round trip
(``sb_send_direct_many``, migration 0013), so the server's work starts only when the
client's ends. Here the client's work is a busy loop of ``--client-us`` per message (the
engine's, measured; the real JSON of each call is made as well), and W2's commits (100
messages over 100 dialogs) are sent three ways, turn by turn on one server so that a shared
machine's load falls on them alike:

- ``serial (today)``: all the client work, then BEGIN, the prepared call and COMMIT in one
  simple query, as the engine sends them;
- ``pipelined by K``: psycopg's pipeline mode; BEGIN, then after each K messages' client work
  the call with those K rows is queued (the server runs it while the client makes the next
  K), then COMMIT and the pipeline's sync;
- ``raw peer``: ``python -m bench``'s W2/postgres peer's SEND (PostgresClient.send_batch:
  ``executemany`` of 100 INSERTs in a transaction), with no simulated work.

The figures are wall µs per commit (median of ``--rounds``, each on fresh databases), the
send rate as a fraction of the raw peer's (issue 40's measure; its target was 0.7x), and the
server backend's CPU µs per commit (``/proc/<pid>/schedstat``). Each
way's messages are checked after: every message in, each dialog numbered on.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table

from bench import leanpg
from bench.pgsendparts import PREPARE_SEND, backend_cpu, send_commit, send_rows
from bench.workloads import body
from tools import pgserver

BATCH = 100
CALL = "SELECT n FROM sb_send_direct_many(%s::jsonb, %s::bytea, %s, %s) n WHERE n IS NOT NULL"


def spin(seconds: float) -> None:
    """Stand-in for the engine's client work: the CPU busy for ``seconds`` (holding the GIL,
    as the engine's Python does)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@dataclass
class Way:
    """One way of sending, on a database of its own."""

    name: str
    url: str
    conn: Any
    commit: Callable[[Way, int], None]
    pairs: list[tuple[int, int]] = field(default_factory=list)
    version: str = ""
    chunk: int = BATCH
    work: float = 0.0  # seconds of client work per message
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    bodies: list[bytes] = field(default_factory=lambda: [body(i, 200) for i in range(1000)])
    wall: float = 0.0
    server: float = 0.0  # the backend's CPU seconds
    commits: int = 0

    @property
    def pid(self) -> int:
        conn = self.conn.conn if self.commit is peer else self.conn
        return int(conn.info.backend_pid)


def _rows(w: Way, start: int, k: int) -> tuple[str, bytes]:
    """The call's rows for messages ``start .. start+k`` and their bodies, made after ``k``
    messages' client work."""
    spin(w.work * k)
    return send_rows(w.pairs, w.ids, w.bodies, start, k)


def serial(w: Way, j: int) -> None:
    """Today's commit: the client's work, then one round trip."""
    send_commit(w.conn, w.name, *_rows(w, j, BATCH), w.version)


def pipelined(w: Way, j: int) -> None:
    """The proposed commit: each chunk's call queued as soon as its rows are made."""
    cursors = []
    with w.conn.pipeline():
        w.conn.execute("BEGIN")
        for start in range(j, j + BATCH, w.chunk):
            text, joined = _rows(w, start, w.chunk)
            cursors.append(w.conn.execute(CALL, (text, joined, time.time(), w.version),
                                          prepare=True))
        w.conn.execute("COMMIT")
    if any(c.fetchone() is None for c in cursors):
        raise AssertionError(f"{w.name}: a SEND wrote nothing")


def peer(w: Way, j: int) -> None:
    w.conn.send_batch([w.bodies[i % len(w.bodies)] for i in range(j, j + BATCH)])


def _ways(server: pgserver.PostgresServer, base: str, chunks: list[int],
          work: float) -> list[Way]:
    import psycopg

    from bench.systems.postgres import SCHEMA as PEER
    from bench.systems.postgres import PostgresClient

    made = leanpg.broker(server.create_database(base))  # copied for each way
    ways = []
    plan: list[tuple[str, Callable[[Way, int], None], int]] = [
        ("serial (today)", serial, BATCH), *((f"pipelined by {k}", pipelined, k) for k in chunks)]
    for n, (name, commit, chunk) in enumerate(plan):
        url = server.create_database(f"{base}_{n}", template=base)
        conn = psycopg.connect(url, autocommit=True,
                               cursor_factory=psycopg.ClientCursor if commit is serial else None)
        conn.execute("SET synchronous_commit = off")
        if commit is serial:
            conn.execute(PREPARE_SEND)
        ways.append(Way(name, url, conn, commit, *made, chunk=chunk, work=work))
    url = server.create_database(f"{base}_peer")
    with psycopg.connect(url, autocommit=True) as setup:
        setup.execute(PEER.format(t="peer_queue"))
    ways.append(Way("raw peer", url, PostgresClient(url, "peer_queue", "normal"), peer))
    return ways


def _check(w: Way, n: int) -> None:
    """Every message in; each dialog's messages numbered on, one msn each."""
    import psycopg

    with psycopg.connect(w.url, autocommit=True) as conn:
        if w.commit is peer:
            row = conn.execute("SELECT count(*), count(DISTINCT id) FROM peer_queue").fetchone()
        else:
            row = conn.execute("SELECT count(*), count(DISTINCT (conv_order, msn))"
                               " FROM sb_messages WHERE status = 1").fetchone()
    assert row is not None and row[0] == row[1] == n, (w.name, row, n)


def run(server: pgserver.PostgresServer, n: int, rounds: int, chunks: list[int],
        client_us: float) -> dict[str, list[float]]:
    """Wall µs per commit of each way (and, under "<way>: server", its server backend's CPU
    µs per commit), one figure per round, on ``server``."""
    figures: dict[str, list[float]] = {}
    tag = uuid.uuid4().hex[:8]
    for r in range(rounds):
        ways = _ways(server, f"overlap_{tag}_{r}", chunks, client_us / 1e6)
        try:
            for t, j in enumerate(range(0, n, BATCH)):
                for w in ways if t % 2 == 0 else ways[::-1]:
                    cpu, began = backend_cpu(w.pid), time.perf_counter()
                    w.commit(w, j)
                    w.wall += time.perf_counter() - began
                    w.server += backend_cpu(w.pid) - cpu
                    w.commits += 1
        finally:
            for w in ways:
                w.conn.close()
        for w in ways:
            _check(w, n)
            figures.setdefault(w.name, []).append(w.wall / w.commits * 1e6)
            figures.setdefault(f"{w.name}: server", []).append(w.server / w.commits * 1e6)
    return figures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.pgoverlap", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=20_000, help="messages per way and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--client-us", type=float, default=27.0,
                   help="the engine's client work per message, µs (default 27)")
    p.add_argument("--chunks", default="10,25",
                   help="messages per pipelined call, comma-separated divisors of 100")
    args = p.parse_args(argv)
    try:
        chunks = [int(c) for c in args.chunks.split(",") if c.strip()]
    except ValueError:
        p.error(f"--chunks {args.chunks!r}: give whole numbers, e.g. 10,25")
    bad = [c for c in chunks if c <= 0 or BATCH % c]
    if bad:
        p.error(f"--chunks: {bad[0]} does not divide {BATCH}; use e.g. 1, 10, 20, 25 or 50")
    n = max(BATCH, args.n - args.n % BATCH)
    with pgserver.PostgresServer(prefix="sbroker-bench-overlap-") as server:
        figures = run(server, n, args.rounds, chunks, args.client_us)
    peer_us = statistics.median(figures["raw peer"])
    table = Table(title=f"W2 send, {n:,} messages {BATCH} per commit, {args.client_us:g} µs of"
                        f" client work per message: wall µs per commit, median of"
                        f" {args.rounds}", title_justify="left")
    for col in ("way", "µs / commit", "rounds", "rate vs raw peer", "server CPU µs / commit"):
        table.add_column(col, justify="left" if col == "way" else "right")
    for name, values in figures.items():
        if name.endswith(": server"):
            continue
        median = statistics.median(values)
        table.add_row(name, f"{median:,.0f}", " ".join(f"{v:,.0f}" for v in values),
                      f"{peer_us / median:.2f}x",
                      f"{statistics.median(figures[name + ': server']):,.0f}")
    Console(width=150).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
