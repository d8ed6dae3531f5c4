"""`python -m bench.engine`: issue 2's sbroker-only figures against its own targets.

W1 and W2 fresh, raw SQLite's one-write-per-transaction limit in the same run, and W1 again on
a database in which N conversations (default 1,000,000) have been begun, used and ended.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.report import RESULTS_DIR
from bench.servers import ServerPool
from bench.systems import Durability, System
from bench.systems.sbroker import Sbroker
from bench.systems.sqlite import PRAGMAS, RawSqlite
from bench.workloads import Sizes, w1, w2

FULL = Sizes(w1=10_000, w2=100_000, w3=0, w4=0)
QUICK = Sizes(w1=2_000, w2=20_000, w3=0, w4=0)
AGE_BATCH = 100
"""Conversations begun together (in one initiator-side group) and ended together."""
AGE_TARGET_TX = 10
"""Conversations the target side answers and ends per transaction: each RECEIVE in a
transaction locks one more group, and a RECEIVE costs more the more groups its transaction
already holds, so small target transactions age fastest."""


@dataclass
class Figure:
    """One figure: its runs, and the target it is held to (as text), if any."""

    name: str
    values: list[float]
    target: str = ""
    met: bool | None = None
    ratio: bool = False

    @property
    def median(self) -> float:
        """The median over runs."""
        return statistics.median(self.values)


def age(broker: Any, n: int, log: Callable[[str], None]) -> float:
    """Begin, use (one message each way) and end `n` conversations; return conversations/s."""
    t0 = last = time.perf_counter()
    done = 0
    while done < n:
        k = min(AGE_BATCH, n - done)
        with broker.transaction() as tx:
            first = tx.begin_dialog("svc_i", "svc_t")
            handles = [first] + [tx.begin_dialog("svc_i", "svc_t", related_conversation=first)
                                 for _ in range(k - 1)]
            tx.send(handles, "DEFAULT", b"ping")
        for j in range(0, k, AGE_TARGET_TX):  # the target answers and ends each one
            with broker.transaction() as tx:
                for _ in range(min(AGE_TARGET_TX, k - j)):
                    (msg,) = tx.receive("q", top=1, timeout=5)
                    tx.send(msg.conversation_handle, "DEFAULT", b"pong")
                    tx.end_conversation(msg.conversation_handle)
        with broker.transaction() as tx:  # the initiator reads k answers + EndDialogs, ends
            msgs = tx.receive("qi", timeout=5)
            if len(msgs) != 2 * k:
                raise RuntimeError(f"aging: {len(msgs)} messages back for {k} conversations")
            for handle in handles:
                tx.end_conversation(handle)
        done += k
        if time.perf_counter() - last > 15:
            last = time.perf_counter()
            rate = done / (last - t0)
            log(f"  aged {done:,} of {n:,} conversations ({rate:,.0f}/s, "
                f"~{(n - done) / rate / 60:,.1f} min left)")
    with broker.transaction() as tx:  # nothing of the aging may be left for W1 to receive
        left = tx.receive("q") + tx.receive("qi")
    if left:
        raise RuntimeError(f"aging left {left[0].message_type_name} messages in the queues")
    return n / (time.perf_counter() - t0)


def fresh_runs(cls: type[System], run: Callable[[System], dict[str, float]], runs: int,
               durability: Durability, pool: ServerPool) -> list[dict[str, float]]:
    """`run` on a freshly set-up system, `runs` times."""
    out = []
    for _ in range(runs):
        workdir = Path(tempfile.mkdtemp(prefix="sbroker-bench-engine-"))
        system = cls(pool)
        try:
            system.setup(workdir, durability)
            try:
                out.append(run(system))
            finally:
                system.teardown()
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return out


def aged_runs(n: int, sizes: Sizes, runs: int, durability: Durability, pool: ServerPool,
              log: Callable[[str], None]
              ) -> tuple[list[dict[str, float]], list[dict[str, float]], float]:
    """W1 `runs` times on one database that first aged `n` conversations, each run paired
    with a W1 on a fresh database just before it (so that load changes hit both alike).

    Returns the aged runs, the paired fresh runs, and the aging rate.
    """
    workdir = Path(tempfile.mkdtemp(prefix="sbroker-bench-engine-"))
    system = Sbroker(pool)
    try:
        system.setup(workdir, durability)
        try:
            rate = age(system.broker, n, log)
            log(f"  aged {n:,} conversations at {rate:,.0f}/s; W1 on that database, each run"
                " paired with one on a fresh database")
            aged, fresh = [], []
            for _ in range(runs):
                fresh += fresh_runs(Sbroker, lambda s: w1(s, sizes), 1, durability, pool)
                aged.append(w1(system, sizes))
            log(f"  W1 receive aged {[round(r['receive']) for r in aged]}  fresh "
                f"{[round(r['receive']) for r in fresh]} msgs/s")
            return aged, fresh, rate
        finally:
            system.teardown()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def measure(args: argparse.Namespace, log: Callable[[str], None]) -> list[Figure]:
    """Every figure of issue 2's benchmark section, with its target checked."""
    sizes = QUICK if args.quick else FULL
    n_aged = args.aged if args.aged is not None else (20_000 if args.quick else 1_000_000)
    pool = ServerPool(log)  # unused by these systems; they take one all the same
    log(f"W1: {sizes.w1:,} msgs of {sizes.body} B on 100 conversations, one per transaction")
    fresh = fresh_runs(Sbroker, lambda s: w1(s, sizes), args.runs, args.durability, pool)
    log(f"  W1 send {[round(r['send']) for r in fresh]}  receive "
        f"{[round(r['receive']) for r in fresh]} msgs/s")
    log("raw SQLite: one committed INSERT per transaction, same count and body")
    raw = fresh_runs(RawSqlite, lambda s: w1(s, sizes), args.runs, args.durability, pool)
    log(f"  raw SQLite INSERT/tx {[round(r['send']) for r in raw]} msgs/s")
    log(f"W2: {sizes.w2:,} msgs, 100 per send transaction, receive top 100")
    batched = fresh_runs(Sbroker, lambda s: w2(s, sizes), args.runs, args.durability, pool)
    log(f"  W2 send {[round(r['send']) for r in batched]}  receive "
        f"{[round(r['receive']) for r in batched]} msgs/s")
    log(f"aging: {n_aged:,} conversations begun, used (one message each way) and ended")
    aged, paired, age_rate = aged_runs(n_aged, sizes, args.runs, args.durability, pool, log)

    w1_recv = Figure("W1 receive (msgs/s)", [r["receive"] for r in fresh])
    raw_write = Figure("raw SQLite, 1 INSERT/tx (msgs/s)", [r["send"] for r in raw])
    aged_recv = Figure(f"W1 receive after {n_aged:,} conversations (msgs/s)",
                       [r["receive"] for r in aged])
    paired_recv = Figure("W1 receive, fresh, paired with each aged run (msgs/s)",
                         [r["receive"] for r in paired])
    figures = [
        Figure("W1 send (msgs/s)", [r["send"] for r in fresh]),
        w1_recv,
        raw_write,
        Figure("W1 receive / raw SQLite write", [w1_recv.median / raw_write.median],
               ">= 0.80", ratio=True),
        Figure("W2 send (msgs/s)", [r["send"] for r in batched], ">= 100,000"),
        Figure("W2 receive (msgs/s)", [r["receive"] for r in batched], ">= 100,000"),
        Figure(f"W1 send after {n_aged:,} conversations (msgs/s)", [r["send"] for r in aged]),
        aged_recv,
        paired_recv,
        Figure("aged W1 receive / paired fresh W1 receive",
               [aged_recv.median / paired_recv.median], ">= 0.90", ratio=True),
        Figure("aging (conversations/s)", [age_rate]),
    ]
    for f in figures:
        if f.target:
            f.met = f.median >= float(f.target.split()[-1].replace(",", ""))
    return figures


def render(figures: list[Figure], title: str) -> Table:
    """One row a figure: median, min-max, target and whether it is met."""
    t = Table(title=title, title_justify="left", pad_edge=False)
    for name in ("Figure", "Median", "Min - max", "Target", "Met"):
        t.add_column(name, justify="left" if name == "Figure" else "right")
    for f in figures:
        digits = ".2f" if f.ratio else ",.0f"

        def shown(v: float, digits: str = digits) -> str:
            return format(v, digits)

        span = "" if len(f.values) < 2 else f"{shown(min(f.values))} - {shown(max(f.values))}"
        met = {True: "[green]yes[/]", False: "[red]no[/]", None: ""}[f.met]
        t.add_row(f.name, shown(f.median), span, f.target, met)
    return t


def main(argv: list[str] | None = None) -> int:
    """Run, print the table, write bench/results/engine-latest.json and a timestamped copy."""
    p = argparse.ArgumentParser(prog="python -m bench.engine", description=__doc__)
    p.add_argument("--quick", action="store_true", help="smaller counts; 20,000 aged")
    p.add_argument("--aged", type=int, default=None, metavar="N",
                   help="conversations to age before W1 again (default 1,000,000)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--durability", choices=["normal", "full"], default="normal")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    console = Console(width=None if sys.stdout.isatty() else 120)
    progress = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 120)
    t0, started = time.perf_counter(), datetime.now(UTC)

    def log(msg: str) -> None:
        progress.print(f"[dim]{time.perf_counter() - t0:6.1f}s[/] {msg}")

    Sbroker.check()
    figures = measure(args, log)
    seconds = time.perf_counter() - t0
    title = (f"sbroker engine (issue 2) — durability \"{args.durability}\", median of "
             f"{args.runs} runs{' (--quick)' if args.quick else ''}, {seconds:.0f} s")
    console.print(render(figures, title))
    console.print(f"  Durability: sbroker durability=\"{args.durability}\"; raw SQLite WAL, "
                  f"synchronous={PRAGMAS[args.durability]}")
    RESULTS_DIR.mkdir(exist_ok=True)
    data = {"started": started.isoformat(), "seconds": round(seconds, 1),
            "args": vars(args), "figures": [f.__dict__ for f in figures]}
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    for name in (f"engine-{stamp}{'-quick' if args.quick else ''}.json", "engine-latest.json"):
        (RESULTS_DIR / name).write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
