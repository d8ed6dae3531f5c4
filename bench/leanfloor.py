"""`python -m bench.leanfloor`: issue 40's first step, the lean queue design's floor (its SQL
alone, no engine) against issue 40's targets, with today's SQL and today's engine beside it.

Every round runs each of these once, in turn (paired), at durability normal (WAL +
synchronous=NORMAL; PostgreSQL synchronous_commit=off), with the bench's own sizes:

- the peers through the bench's own clients, W1 and W2 as bench.workloads runs them: huey
  (W1), litequeue (W2 send), and the raw SKIP LOCKED PostgreSQL table's send_batch (W2 send);
- sbroker's engine, the same way (W1 and W2 on SQLite, W2 on PostgreSQL);
- today's SQL with no engine (bench.lean.Today: the engine's own statements for each
  commit), and bench.floor's W2 insert alone (the figure earlier notes quote); on
  PostgreSQL, sb_send_direct_many;
- the lean designs' SQL (bench.lean, bench.leanpg).

Each phase gives msgs/s and msgs per CPU second (this process's threads, plus the server's
processes on PostgreSQL): on a shared machine the second is swayed less by the load.
Printed: each figure's median over the rounds and its range; each target's ratio in every
round (paired) and their median; the load average before and after each round; then the
WAL pages each SQLite design writes per commit (deterministic).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import os
import shutil
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench import floor, lean, leanpg
from bench.servers import ServerPool
from bench.systems.base import Client, System
from bench.systems.huey import Huey
from bench.systems.litequeue import LiteQueue
from bench.systems.sbroker import Sbroker, SbrokerPostgres
from bench.workloads import FULL, QUICK, RECEIVE_TIMEOUT, Sizes, Tally, body, receive_all

Figure = Callable[[], dict[str, float]]

SQLITE = [*lean.DESIGNS, "engine"]
POSTGRES = ["today's SQL", "lean SQL", "lean SQL, bucketed", "lean SQL + stream index", "engine"]
TARGETS = [  # (target, figure, peer, at least, ours)
    ("W2 send >= 0.7x litequeue", "W2 send", "litequeue", 0.7, SQLITE),
    ("W1 send >= 0.4x huey", "W1 send", "huey", 0.4, SQLITE),
    ("W1 receive >= 0.4x huey", "W1 receive", "huey", 0.4, SQLITE),
    ("PG W2 send >= 0.7x raw", "PG W2 send", "raw SKIP LOCKED", 0.7, POSTGRES),
]
ENGINE_VS_FLOOR = [  # (figure, the engine's own SQL alone)
    ("W1 send", "today's SQL"), ("W1 receive", "today's SQL"), ("W2 send", "today's SQL"),
    ("W2 receive", "today's SQL"), ("PG W2 send", "today's SQL"),
]
_databases = itertools.count(1)


def _in_tmp(fn: Callable[[Path], dict[str, float]]) -> dict[str, float]:
    workdir = Path(tempfile.mkdtemp(prefix="sbroker-bench-lean-"))
    try:
        return fn(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _system(cls: type[System], pool: ServerPool, shape: str, sizes: Sizes) -> Figure:
    """A peer or the engine through the bench's own clients, W1 or W2 as bench.workloads
    runs them (the same calls, the same checks), each phase measured by lean.phase."""
    def run() -> dict[str, float]:
        def go(workdir: Path) -> dict[str, float]:
            system = cls(pool)
            system.setup(workdir, "normal")
            server = pool.get("postgres") if cls.servers else None
            cpu = server._pg.cpu_seconds if server else None  # type: ignore[attr-defined]
            client = system.client()
            try:
                return (_w1 if shape == "W1" else _w2)(system, client, sizes, cpu)
            finally:
                client.close()
                system.teardown()
        return _in_tmp(go)
    return run


def _w1(system: System, c: Client, sizes: Sizes,
        cpu: Callable[[], float] | None) -> dict[str, float]:
    n, bodies = sizes.w1, [body(i, sizes.body) for i in range(sizes.w1)]
    tally = Tally(n, sizes.body)
    return {**lean.phase("send", n, lambda: [c.send_one(b) for b in bodies], cpu),
            **lean.phase("receive", n, lambda: [tally.add(c.receive_one(RECEIVE_TIMEOUT))
                                                for _ in range(n)], cpu)}


def _w2(system: System, c: Client, sizes: Sizes,
        cpu: Callable[[], float] | None) -> dict[str, float]:
    n, k = sizes.w2, sizes.batch
    bodies, tally = [body(i, sizes.body) for i in range(n)], Tally(n, sizes.body)
    out = lean.phase("send", n, lambda: [c.send_batch(bodies[j:j + k])
                                         for j in range(0, n, k)], cpu)
    if system.no_batch_receive:
        return out
    return {**out, **lean.phase("receive", n, lambda: receive_all(c, tally, k), cpu)}


def _sql(fn: Callable[[Path, int], dict[str, float]], n: int) -> Figure:
    return lambda: _in_tmp(lambda d: fn(d / "f.db", n))


def _pg(pool: ServerPool, design: str, n: int) -> Figure:
    def run() -> dict[str, float]:
        server = pool.get("postgres")
        url = server.create_database(  # type: ignore[attr-defined]
            f"lean_{os.getpid()}_{next(_databases)}")
        cpu = server._pg.cpu_seconds  # type: ignore[attr-defined]
        if design == "peer":
            return leanpg.peer_send(url, n, cpu)
        return leanpg.w2_send(url, n, design, cpu)
    return run


def plan(sizes: Sizes, pool: ServerPool, pg: bool,
         checkpoints: bool) -> list[tuple[str, str, Figure]]:
    """(workload, row name, figure) in the order each round runs them."""
    n1, n2 = sizes.w1, sizes.w2
    designs = list(lean.DESIGNS.items())
    rows: list[tuple[str, str, Figure]] = [("W1", "huey", _system(Huey, pool, "W1", sizes))]
    rows += [("W1", name, _sql(functools.partial(lean.w1, make, checkpoints=checkpoints), n1))
             for name, make in designs]
    rows += [("W1", "engine", _system(Sbroker, pool, "W1", sizes)),
             ("W2", "litequeue", _system(LiteQueue, pool, "W2", sizes))]
    rows += [("W2", name, _sql(functools.partial(lean.w2, make, checkpoints=checkpoints), n2))
             for name, make in designs]
    rows += [("W2", "engine", _system(Sbroker, pool, "W2", sizes)),
             ("W2", "today's SQL, insert only", _sql(floor.sbroker_w2, n2))]
    if pg:
        rows += [("PG W2 send", "raw SKIP LOCKED", _pg(pool, "peer", n2))]
        rows += [("PG W2 send", f"{d} SQL", _pg(pool, d.replace("'s", ""), n2))
                 for d in ("today's", "lean")]
        rows += [("PG W2", "engine", _system(SbrokerPostgres, pool, "W2", sizes))]
        rows += [("PG W2 send", f"{d} SQL{rest}", _pg(pool, d + rest, n2))
                 for d, rest in (("lean", ", bucketed"), ("lean", " + stream index"))]
    return rows


def _key(workload: str, metric: str) -> str:
    """The figure's name: "W1" and "send per CPU s" make "W1 send per CPU s", and so do
    "W1 send" and the same metric."""
    first, _, rest = metric.partition(" ")
    if workload.endswith(first):
        return f"{workload} {rest}" if rest else workload
    return f"{workload} {metric}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.leanfloor", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3, help="paired rounds (medians over them)")
    p.add_argument("--quick", action="store_true", help="the bench's --quick sizes")
    p.add_argument("--no-pg", action="store_true", help="SQLite only")
    p.add_argument("--inline-checkpoints", action="store_true",
                   help="SQLite's checkpoints inside COMMIT, as the peers have them (default:"
                        " sbroker's checkpointer thread, as the engine has them)")
    args = p.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    console = Console(width=130)
    pool = ServerPool(lambda _line: None)
    figures: dict[tuple[str, str], list[float]] = {}
    try:
        rows = plan(sizes, pool, pg=not args.no_pg, checkpoints=not args.inline_checkpoints)
        for r in range(1, args.rounds + 1):
            before = os.getloadavg()[0]
            for workload, name, figure in rows:
                for metric, value in figure().items():
                    figures.setdefault((_key(workload, metric), name), []).append(value)
            console.print(f"round {r}/{args.rounds}: load average (1 min) {before:.2f} before,"
                          f" {os.getloadavg()[0]:.2f} after")
    finally:
        pool.close()
    console.print("SQLite checkpoints of the SQL-alone rows: " + (
        "inside COMMIT (SQLite's own)" if args.inline_checkpoints
        else "sbroker's checkpointer thread (the engine's)"))
    _report(console, figures, sizes, args.rounds)
    _pages(console)
    return 0


def _report(console: Console, figures: dict[tuple[str, str], list[float]], sizes: Sizes,
            rounds: int) -> None:
    t = Table(title=f"Issue 40's floor: W1 {sizes.w1:,}, W2 {sizes.w2:,} msgs of 200 B,"
                    f" durability normal, median of {rounds} paired rounds (msgs/s)",
              title_justify="left")
    for col in ("figure", "system / design", "median", "min - max"):
        t.add_column(col, justify="left" if col in ("figure", "system / design") else "right")
    for (key, name), values in sorted(figures.items()):
        t.add_row(key.replace(lean.CPU, " per CPU second"), name,
                  f"{statistics.median(values):,.0f}",
                  f"{min(values):,.0f} - {max(values):,.0f}")
    console.print(t)
    for suffix, what in (("", "msgs/s"), (lean.CPU, "msgs per CPU second")):
        console.print(f"Targets on {what}, ratio per round (paired) and their median:")
        for label, key, peer, at_least, ours in TARGETS:
            for name in ours:
                _ratio(console, figures, f"  {label}", (key + suffix, name),
                       (key + suffix, peer), at_least)
        console.print(f"The engine against its own SQL alone (today's schema), {what}:")
        for key, sql in ENGINE_VS_FLOOR:
            _ratio(console, figures, f"  {key}", (key + suffix, "engine"), (key + suffix, sql),
                   None)


def _pages(console: Console) -> None:
    """WAL pages per commit of each SQLite design (deterministic; one pass)."""
    t = Table(title="WAL pages written per commit, SQL alone (10,000 messages queued first;"
                    " receives include their share of sweeps)", title_justify="left")
    t.add_column("design")
    shapes = ("W1 send", "W1 receive", "W2 send", "W2 receive")
    for shape in shapes:
        t.add_column(shape, justify="right")
    for name, make in lean.DESIGNS.items():
        got = _in_tmp(lambda d, make=make: lean.pages(make, d / "f.db"))  # type: ignore[misc]
        t.add_row(name, *(f"{got[s]:.1f}" for s in shapes))
    console.print(t)


def _ratio(console: Console, figures: dict[tuple[str, str], list[float]], label: str,
           ours: tuple[str, str], peer: tuple[str, str], at_least: float | None) -> None:
    if ours not in figures or peer not in figures:
        return
    paired = [a / b for a, b in zip(figures[ours], figures[peer], strict=True)]
    med = statistics.median(paired)
    verdict = "" if at_least is None else ("  meets it" if med >= at_least
                                           else "  below it")
    console.print(f"{label}: {ours[1]} / {peer[1]} = {med:.2f} (rounds:"
                  f" {', '.join(f'{x:.2f}' for x in paired)}){verdict}")


if __name__ == "__main__":
    raise SystemExit(main())
