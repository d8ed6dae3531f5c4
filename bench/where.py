"""`python -m bench.where [--quick] [--runs 3] [--backend sqlite|postgres]`: where a message's
time goes, per workload, on each backend. Writes bench/results/where-latest.json.

W1 (one message per transaction) and W2 (100 over 100 dialogs) through the suite's sbroker
client, the backend's peer in the same run (huey, litequeue; the raw SKIP LOCKED table); per
message, medians of ``--runs``: wall and CPU time (all threads); the database's share (SQLite:
the engine's statements on the transaction's thread, COMMIT included, the checkpointer's
apart; PostgreSQL: the server's CPU) and the rest (the engine's Python, its waits); the
dearest statements (SQLite: by SQL block name, a SELECT's rows fetched inside its time;
PostgreSQL: ``pg_stat_statements``, inside functions too). W3 (8 producers, 8 consumers) on
SQLite: CPU per message and the ceiling it sets (the GIL runs one thread's Python at a time:
1e6 / CPU µs messages a second, however commits are grouped), then, in a run with a profile
hook on every thread, the calls into SQLite and GIL hand-offs per message. Durability "normal".
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sqlite3
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import FrameType
from typing import Any
from unittest import mock

from bench import docs
from bench.measure import cpu as process_cpu
from bench.measure import progress
from bench.report import store
from bench.runner import fresh
from bench.servers import PostgresServer, ServerPool
from bench.systems import SYSTEMS, System, Unavailable
from bench.systems.sbroker import Sbroker, SbrokerPostgres
from bench.workloads import FULL, QUICK, Sizes, w1, w2, w3

PEERS = {("sqlite", "W1"): "huey", ("sqlite", "W2"): "litequeue",
         ("postgres", "W1"): "postgres", ("postgres", "W2"): "postgres"}
CHECKPOINT = "PRAGMA wal_checkpoint(PASSIVE)"
PG_SETTINGS = {"shared_preload_libraries": "pg_stat_statements",
               "pg_stat_statements.track": "all"}
PG_STATS = """
SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 80), sum(calls)::bigint,
       sum(total_exec_time + total_plan_time)
FROM pg_stat_statements
WHERE query !~* 'pg_stat_statements|^(BEGIN|COMMIT|SET|LISTEN)'
GROUP BY 1 ORDER BY 3 DESC LIMIT 8
"""
PREPARED = re.compile(r"^PREPARE (\w+) AS ")
SQLITE_CALLS = frozenset({"execute", "executemany", "executescript", "fetchone", "fetchall",
                          "fetchmany", "commit", "rollback"})
Around = Callable[[str], contextlib.AbstractContextManager[Any]]


@dataclass
class Phase:
    """One phase of one run: CPU seconds, seconds in the database and beside it, and each
    statement's (seconds, calls)."""

    cpu: float = 0.0
    database: float | None = None
    beside: float = 0.0
    statements: dict[str, tuple[float, int]] = field(default_factory=dict)


class Rows:
    """A SELECT's rows, fetched while the statement was timed, read like its cursor."""

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows, self._at, self.rowcount = rows, 0, rowcount

    def fetchone(self) -> Any:
        self._at += 1
        return self._rows[self._at - 1] if self._at <= len(self._rows) else None

    def fetchall(self) -> list[Any]:
        rest, self._at = self._rows[self._at:], len(self._rows)
        return rest

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class SqliteProbe:
    """Times every statement of the engine's SQLite connections, by SQL block name."""

    def __init__(self) -> None:
        from sbroker.storage.sqlite import sweeper
        from sbroker.storage.sqlite.connection import BACKEND, SQL

        self.names = {sql: name for queries in (SQL, BACKEND) for name, sql in queries.items()}
        self.names.update({sql: f"sweeper {name.strip('_').lower()}"
                           for name, sql in vars(sweeper).items()
                           if name.isupper() and isinstance(sql, str)})
        self.lock = threading.Lock()
        self.spent: dict[str, tuple[float, int]] = {}
        self.phases: dict[str, Phase] = {}

    def add(self, sql: str, seconds: float, many: bool) -> None:
        name = self.names.get(sql) or sql.strip().splitlines()[0][:70]
        name = f"executemany {name}" if many else name
        with self.lock:
            before, calls = self.spent.get(name, (0.0, 0))
            self.spent[name] = (before + seconds, calls + 1)

    def patched(self) -> contextlib.AbstractContextManager[Any]:
        """The engine's connections, each statement timed, while the block runs."""
        from sbroker.storage.sqlite import connector
        from sbroker.storage.sqlite.connection import SqliteConnection

        probe = self

        class Timed(SqliteConnection):
            def execute(self, sql: str, params: Any = (), /) -> Any:
                t0 = time.perf_counter()
                cur: Any = super().execute(sql, params)
                if cur.description is not None:  # a SELECT's row steps count too
                    cur = Rows(cur.fetchall(), cur.rowcount)
                probe.add(sql, time.perf_counter() - t0, False)
                return cur

            def executemany(self, sql: str, params: Any, /) -> Any:
                t0 = time.perf_counter()
                cur = super().executemany(sql, params)
                probe.add(sql, time.perf_counter() - t0, True)
                return cur

        return mock.patch.object(connector, "SqliteConnection", Timed)

    @contextlib.contextmanager
    def around(self, phase: str) -> Iterator[None]:
        with self.lock:
            self.spent.clear()
        cpu = process_cpu()
        yield
        cpu = process_cpu() - cpu
        with self.lock:
            statements = dict(self.spent)
        beside = statements.pop(CHECKPOINT, (0.0, 0))[0]
        self.phases[phase] = Phase(cpu, sum(s for s, _ in statements.values()), beside,
                                   statements)


class PostgresProbe:
    """The server's CPU time and ``pg_stat_statements`` around each phase."""

    def __init__(self, server: PostgresServer) -> None:
        self.server = server
        self.phases: dict[str, Phase] = {}

    def _sql(self, statement: str) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.server.dsn(), autocommit=True) as conn:
            cur = conn.execute(statement)
            return cur.fetchall() if cur.description else []

    @contextlib.contextmanager
    def around(self, phase: str) -> Iterator[None]:
        self._sql("SELECT pg_stat_statements_reset()")
        cpu, served = process_cpu(), self.server.cpu_seconds()
        yield
        cpu, served = process_cpu() - cpu, self.server.cpu_seconds() - served
        statements = {PREPARED.sub(r"\1: ", text): (ms / 1000, calls)
                      for text, calls, ms in self._sql(PG_STATS)}
        self.phases[phase] = Phase(cpu, served, 0.0, statements)


class Tally:
    """A profile hook on every thread: calls into sqlite3, and changes of the thread that runs
    Python (each a hand-off of the GIL)."""

    def __init__(self) -> None:
        self.calls = self.handoffs = self._last = 0

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        me = threading.get_ident()
        if me != self._last:
            self._last, self.handoffs = me, self.handoffs + 1
        if event == "c_call" and arg.__name__ in SQLITE_CALLS and isinstance(
                getattr(arg, "__self__", None), (sqlite3.Connection, sqlite3.Cursor)):
            self.calls += 1


def _run(system: System, shape: str, sizes: Sizes, around: Around | None = None
         ) -> dict[str, float]:
    """One fresh run of the shape on ``system``: seconds per phase (W3: "all", until every
    message is received)."""
    with fresh(system):
        if shape == "W3":
            return {"all": sizes.w3 / w3(system, sizes)["receive"]}
        n = sizes.w1 if shape == "W1" else sizes.w2
        rates = (w1 if shape == "W1" else w2)(system, sizes, *([around] if around else []))
        return {phase: n / rate for phase, rate in rates.items()}


@dataclass
class Row:
    """One phase of one workload on one backend, over every run."""

    workload: str
    phase: str
    backend: str
    peer: str | None
    n: int
    transactions: int
    walls: list[float] = field(default_factory=list)
    peers: list[float] = field(default_factory=list)
    phases: list[Phase] = field(default_factory=list)
    extra: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Microseconds per message, every run, and the median run's dearest statements."""
        us = 1e6 / self.n
        median = sorted(range(len(self.walls)), key=self.walls.__getitem__)[
            len(self.walls) // 2]
        statements = sorted(self.phases[median].statements.items(), key=lambda kv: -kv[1][0])
        return {
            "workload": self.workload, "phase": self.phase, "backend": self.backend,
            "peer": self.peer if self.peers else None, "n": self.n,
            "wall_us": [w * us for w in self.walls], "peer_us": [w * us for w in self.peers],
            "cpu_us": [p.cpu * us for p in self.phases],
            "database_us": [p.database * us for p in self.phases if p.database is not None],
            "beside_us": [p.beside * us for p in self.phases],
            "statements": [[name, calls / self.transactions, seconds * us]
                           for name, (seconds, calls) in statements[:8]], **self.extra}


def _peer(backend: str, shape: str, log: Callable[[str], None]) -> type[System] | None:
    peer = next(s for s in SYSTEMS if s.name == PEERS[backend, shape])
    try:
        peer.check()
    except Unavailable as exc:
        log(f"{backend} {shape}: no peer ({exc})")
        return None
    return peer


def measure(backend: str, sizes: Sizes, runs: int, pool: ServerPool,
            log: Callable[[str], None]) -> list[Row]:
    """Every phase of W1 and W2 on one backend, ``runs`` times, the peer in each run."""
    out: list[Row] = []
    for shape in ("W1", "W2"):
        n, k = (sizes.w1, 1) if shape == "W1" else (sizes.w2, sizes.batch)
        peer = _peer(backend, shape, log)
        rows = {phase: Row(shape, phase, backend, peer.name if peer else None, n, -(-n // k))
                for phase in ("send", "receive")}
        for run in range(1, runs + 1):
            probe: SqliteProbe | PostgresProbe
            if backend == "sqlite":
                probe = SqliteProbe()
                with probe.patched():
                    walls = _run(Sbroker(pool), shape, sizes, probe.around)
            else:
                server = pool.get("postgres")
                assert isinstance(server, PostgresServer)
                probe = PostgresProbe(server)
                walls = _run(SbrokerPostgres(pool), shape, sizes, probe.around)
            theirs = _run(peer(pool), shape, sizes) if peer else {}
            for phase, row in rows.items():
                row.walls.append(walls[phase])
                row.phases.append(probe.phases[phase])
                if phase in theirs:
                    row.peers.append(theirs[phase])
            log(f"{backend} {shape} run {run}/{runs}: sbroker " + ", ".join(
                f"{p} {n / w:,.0f}" for p, w in walls.items()) + " msgs/s; peer " + (
                ", ".join(f"{p} {n / w:,.0f}" for p, w in theirs.items()) or "none"))
        out += rows.values()
    return out


def measure_w3(sizes: Sizes, runs: int, pool: ServerPool, log: Callable[[str], None]) -> Row:
    """W3 on SQLite: CPU per message over ``runs`` runs, then one counted run."""
    row = Row("W3", "send + receive", "sqlite", None, sizes.w3, sizes.w3)
    for run in range(1, runs + 1):
        cpu = process_cpu()
        row.walls.append(_run(Sbroker(pool), "W3", sizes)["all"])
        row.phases.append(Phase(process_cpu() - cpu))
        log(f"sqlite W3 run {run}/{runs}: {sizes.w3 / row.walls[-1]:,.0f} msgs/s")
    tally = Tally()
    threading.setprofile(tally)
    sys.setprofile(tally)
    try:
        _run(Sbroker(pool), "W3", sizes)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    row.extra = {"ceiling": 1e6 / statistics.median(p.cpu * 1e6 / sizes.w3 for p in row.phases),
                 "sqlite_calls": tally.calls / sizes.w3, "handoffs": tally.handoffs / sizes.w3}
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.where", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="the suite's --quick sizes")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--backend", choices=("sqlite", "postgres"), action="append",
                   help="only this backend (repeatable; default both)")
    p.add_argument("--no-json", action="store_true", help="do not write bench/results/")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.runs < 1:
        p.error("--runs must be at least 1")
    sizes = QUICK if args.quick else FULL
    started, log = datetime.now(UTC), progress()

    pool = ServerPool(log, pg_settings=PG_SETTINGS)
    rows: list[dict[str, Any]] = []
    try:
        for backend in args.backend or ("sqlite", "postgres"):
            if backend == "postgres":
                server = pool.get("postgres")
                assert isinstance(server, PostgresServer)
                for db in ("template1", "postgres"):  # the databases made from here on too
                    server.sql("CREATE EXTENSION pg_stat_statements", db)
            rows += [r.to_json() for r in measure(backend, sizes, args.runs, pool, log)]
            if backend == "sqlite":
                rows.append(measure_w3(sizes, args.runs, pool, log).to_json())
    finally:
        pool.close()
    command = " ".join(["python -m bench.where", *(sys.argv[1:] if argv is None else argv)])
    data = {"started": started.isoformat(), "command": command, "runs": args.runs,
            "rows": rows}
    print("\n".join(docs.where(data)))
    if not args.no_json:
        print(f"wrote {store('where-latest.json', data)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
