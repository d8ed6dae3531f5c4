"""`python -m bench.sqlitestatements`: where a transaction's time goes on SQLite, statement
by statement, beside the embedded peer's whole transaction in the same run.

``python -m bench.sqlitestatements [-n 20000] [-k 100] [--runs 3]``

Each run sends ``-n`` messages ``-k`` per transaction round-robin on 100 dialogs of a fresh
broker database, then receives them ``-k`` at a time (W2's shape with the defaults; ``-k 1``
is W1's), through the bench's own client (``bench/systems/sbroker.py``, as ``python -m bench``
runs them). The engine's connections are made of a subclass that times every ``execute`` and
``executemany`` (a SELECT's rows are fetched inside the timing, so its row steps count).
The peer runs the same phases through its bench client in the same run: litequeue's batch put
for ``-k`` above 1 (it has no batch receive), huey's enqueue and dequeue for ``-k 1``.
Printed, per phase:

- the wall time per message of sbroker and of the peer (medians of ``--runs``);
- from the median run, each statement's time per message on the transaction's thread, the
  rest of that thread's time (the engine's Python and its waits), and the checkpointer
  thread's time apart (it runs beside the transactions, on its own connection).

The statements alone against the peer's whole time say how far the schema can go: when they
already take the peer's time over the target ratio, no Python makes up for it. Durability
"normal" for all (synchronous=NORMAL).
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import statistics
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from rich.console import Console
from rich.table import Table

from bench.systems.base import System, Unavailable
from bench.workloads import Around, Sizes, untouched, w1, w2

CHECKPOINT = "PRAGMA wal_checkpoint(PASSIVE)"


class Rows:
    """A SELECT's rows, fetched while the statement was timed, read like its cursor."""

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows, self._at, self.rowcount = rows, 0, rowcount

    def fetchone(self) -> Any:
        if self._at >= len(self._rows):
            return None
        self._at += 1
        return self._rows[self._at - 1]

    def fetchall(self) -> list[Any]:
        rest, self._at = self._rows[self._at:], len(self._rows)
        return rest

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class Timings:
    """Seconds and calls per statement (its first line), per thread kind, this process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()

    def add(self, sql: str, seconds: float, many: bool) -> None:
        line = sql.strip().splitlines()[0]
        name = ("executemany " if many else "") + (line[:70] + "..." if len(line) > 73 else line)
        with self.lock:
            self.seconds[name] += seconds
            self.calls[name] += 1

    def clear(self) -> None:
        with self.lock:
            self.seconds.clear()
            self.calls.clear()


def timed_connection(timings: Timings) -> type[sqlite3.Connection]:
    """The engine's connection class, timing every statement into ``timings``."""
    from sbroker.storage.sqlite.connection import SqliteConnection

    class Timed(SqliteConnection):
        def execute(self, sql: str, params: Any = (), /) -> Any:
            t0 = time.perf_counter()
            cur: Any = super().execute(sql, params)
            if cur.description is not None:  # rows to step through: inside the timing
                cur = Rows(cur.fetchall(), cur.rowcount)
            timings.add(sql, time.perf_counter() - t0, False)
            return cur

        def executemany(self, sql: str, params: Any, /) -> Any:
            t0 = time.perf_counter()
            cur = super().executemany(sql, params)
            timings.add(sql, time.perf_counter() - t0, True)
            return cur

    return Timed


def _phases(system: System, workdir: Path, n: int, k: int,
            around: Around = untouched) -> dict[str, float]:
    """Wall seconds of ``system``'s phases of the shape: the bench's own W1 (``k`` 1) or W2
    (``k`` per transaction) of ``n`` messages, ``around`` entered around each phase."""
    sizes = Sizes(w1=n, w2=n, w3=0, w4=0, batch=k)
    workload = w1 if k == 1 else w2
    system.setup(workdir, "normal")
    try:
        rates = workload(system, sizes, around)
    finally:
        system.teardown()
    return {phase: n / per_second for phase, per_second in rates.items()}


def _sbroker_run(workdir: Path, n: int, k: int, timings: Timings
                 ) -> dict[str, tuple[float, dict[str, float], Counter[str]]]:
    """One run's send and receive phases: wall seconds, statement seconds and calls."""
    from bench.servers import ServerPool
    from bench.systems.sbroker import Sbroker
    from sbroker.storage.sqlite import connector

    statements: dict[str, tuple[dict[str, float], Counter[str]]] = {}

    @contextlib.contextmanager
    def counted(phase: str) -> Iterator[None]:
        timings.clear()
        yield
        with timings.lock:
            statements[phase] = (dict(timings.seconds), Counter(timings.calls))

    with mock.patch.object(connector, "SqliteConnection", timed_connection(timings)):
        walls = _phases(Sbroker(ServerPool(lambda _line: None)), workdir, n, k, counted)
    return {phase: (wall, *statements[phase]) for phase, wall in walls.items()}


def peer_system(k: int) -> type[System]:
    """The peer the issue holds this shape to: litequeue for batches, huey for W1."""
    from bench.systems.huey import Huey
    from bench.systems.litequeue import LiteQueue

    return LiteQueue if k > 1 else Huey


def _peer_run(workdir: Path, n: int, k: int) -> dict[str, float]:
    """The peer's wall seconds per phase: litequeue's batch put (it has no batch receive),
    or huey's enqueues then dequeues, one per transaction."""
    from bench.servers import ServerPool

    return _phases(peer_system(k)(ServerPool(lambda _line: None)), workdir, n, k)


def _table(per_msg: dict[str, float], calls: Counter[str], transactions: int,
           wall: float) -> Table:
    """One phase's statements, µs per message, from the median run."""
    sql = sum(us for name, us in per_msg.items() if name != CHECKPOINT)
    table = Table()
    for col in ("calls / tx", "µs / msg"):
        table.add_column(col, justify="right")
    table.add_column("statement", no_wrap=True, overflow="ellipsis", max_width=90)
    for name, us in sorted(per_msg.items(), key=lambda item: -item[1]):
        where = "  (checkpointer thread, beside the transactions)" if name == CHECKPOINT else ""
        table.add_row(f"{calls[name] / transactions:,.2f}", f"{us:,.2f}", name + where)
    table.add_row("", f"{wall - sql:,.2f}", "the rest of the transaction's thread (Python,"
                  " waits)")
    return table


def _summary(phase: str, n: int, k: int, runs: int, wall: float, sql: float,
             peer: tuple[str, float] | None) -> str:
    line = (f"{phase}, {k} per transaction ({n:,} msgs, median of {runs}): sbroker"
            f" {wall:,.1f} µs per message, of which its statements {sql:,.1f}")
    if peer is not None:
        line += (f"; {peer[0]} {peer[1]:,.1f} µs per message. The statements alone:"
                 f" {peer[1] / sql:.2f}x the peer's speed; sbroker whole: {peer[1] / wall:.2f}x")
    return line


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.sqlitestatements", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", type=int, default=20_000, help="messages per run (default 20,000)")
    p.add_argument("-k", type=int, default=100, help="messages per transaction (default 100)")
    p.add_argument("--runs", type=int, default=3)
    args = p.parse_args(argv)
    n, k = args.n - args.n % args.k, args.k
    if n <= 0 or k <= 0:
        p.error("-n and -k must be positive, with -n at least -k")
    console = Console(width=160)
    timings = Timings()
    ours: list[dict[str, tuple[float, dict[str, float], Counter[str]]]] = []
    theirs: list[dict[str, float]] = []
    peer_name = peer_system(k).name
    try:
        peer_system(k).check()
    except Unavailable as exc:
        console.print(f"{exc}: sbroker alone in this run, no peer to compare with",
                      soft_wrap=True)
        peer_name = ""
    for run in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="sbroker-sqlite-stmts-") as tmp:
            ours.append(_sbroker_run(Path(tmp), n, k, timings))
            peer = _peer_run(Path(tmp), n, k) if peer_name else {}
            theirs.append(peer)
        for phase, (wall, _s, _c) in ours[-1].items():
            line = f"run {run}/{args.runs} {phase:>7}: sbroker {n / wall:>9,.0f} msgs/s"
            if phase in peer:
                line += f", {peer_name} {n / peer[phase]:>9,.0f} msgs/s"
            console.print(line)
    for phase in ("send", "receive"):
        runs = sorted(ours, key=lambda r: r[phase][0])
        wall, seconds, calls = runs[len(runs) // 2][phase]
        peer_wall = [r[phase] for r in theirs if phase in r]
        peer_us = (peer_name, statistics.median(peer_wall) / n * 1e6) if peer_wall else None
        per_msg = {name: sec / n * 1e6 for name, sec in seconds.items()}
        sql = sum(us for name, us in per_msg.items() if name != CHECKPOINT)
        console.print(_summary(phase, n, k, args.runs, wall / n * 1e6, sql, peer_us),
                      soft_wrap=True)
        console.print(_table(per_msg, calls, -(-n // k), wall / n * 1e6))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
