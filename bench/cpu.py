"""`python -m bench.cpu`: sbroker's CPU per message in W1 and W3, the ceiling it sets, and the
calls into SQLite and GIL hand-offs behind it.

Issue 6 holds W3 (8 producers + 8 consumers, one message per transaction) to 3x sbroker's own
W1.  Every broker transaction runs Python, and one process runs Python on one core at a time
(the GIL), so W3 can move at most 1 / (CPU seconds per message sent and received) messages per
second, however the commits are grouped.  This prints that CPU time for W1's send and receive
phases and for W3 (all threads of this process, median of --runs), the ceiling it implies, and
the rates measured in the same runs.  CPU time does not depend on what else the machine runs;
the rates do.

Then, in one more run of each with a profile hook on every thread (slower, so not timed):
- SQLite calls per message: calls from Python into the sqlite3 module that may run SQLite
  (execute, executemany, fetchone, fetchall, commit, ...).  Each releases the GIL while SQLite
  works, so under W3 each is a chance for another thread to take it.
- GIL hand-offs per message: how often the thread running Python changed (consecutive profile
  events from different threads), each a futex wake-up and a context switch.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.servers import ServerPool
from bench.systems import Durability, System
from bench.systems.sbroker import Sbroker
from bench.workloads import RECEIVE_TIMEOUT, Sizes, body, w3

_SQLITE_CALLS = frozenset({"execute", "executemany", "executescript", "fetchone", "fetchall",
                           "fetchmany", "commit", "rollback"})


def _usage() -> tuple[float, float, int]:
    """(CPU seconds, of them in the kernel, context switches) of every thread so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (usage.ru_utime + usage.ru_stime, usage.ru_stime,
            usage.ru_nvcsw + usage.ru_nivcsw)


class Tally:
    """A profile hook (every thread): counts calls into sqlite3 and changes of the thread
    that runs Python."""

    def __init__(self) -> None:
        self.calls = 0
        self.handoffs = 0
        self._last = 0

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        me = threading.get_ident()
        if me != self._last:
            self._last = me
            self.handoffs += 1
        if event == "c_call" and arg.__name__ in _SQLITE_CALLS and isinstance(
                getattr(arg, "__self__", None), (sqlite3.Connection, sqlite3.Cursor)):
            self.calls += 1


@contextmanager
def counting() -> Iterator[Tally]:
    """Count (see :class:`Tally`) on this thread and on every thread started meanwhile."""
    tally = Tally()
    threading.setprofile(tally)
    sys.setprofile(tally)
    try:
        yield tally
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


Phase = Callable[[System, Sizes, Callable[[], Any]], dict[str, float]]


def w1_phases(system: System, sizes: Sizes, phase: Callable[[], Any]) -> dict[str, float]:
    """W1 one phase at a time: ``phase()`` is entered around the send loop, then around the
    receive loop; figures of both."""
    n, c = sizes.w1, system.client()
    figures: dict[str, float] = {}
    try:
        bodies = [body(i, sizes.body) for i in range(n)]
        with phase() as mark:
            t0 = time.perf_counter()
            for b in bodies:
                c.send_one(b)
            figures["send"] = n / (time.perf_counter() - t0)
        figures.update({f"send_{k}": v for k, v in mark.items()})
        with phase() as mark:
            t0 = time.perf_counter()
            for _ in range(n):
                if c.receive_one(RECEIVE_TIMEOUT) is None:
                    raise RuntimeError("W1: a message was lost")
            figures["receive"] = n / (time.perf_counter() - t0)
        figures.update({f"receive_{k}": v for k, v in mark.items()})
        return figures
    finally:
        c.close()


def w3_phase(system: System, sizes: Sizes, phase: Callable[[], Any]) -> dict[str, float]:
    with phase() as mark:
        figures = w3(system, sizes)
    figures.update({f"all_{k}": v for k, v in mark.items()})
    return figures


@contextmanager
def _cpu(n: int) -> Iterator[dict[str, float]]:
    """Figures of the block: CPU µs, kernel CPU µs and context switches per message."""
    out: dict[str, float] = {}
    cpu, sys_cpu, switches = _usage()
    yield out
    cpu_end, sys_end, switches_end = _usage()
    out.update(cpu=(cpu_end - cpu) / n * 1e6, sys_us=(sys_end - sys_cpu) / n * 1e6,
               switches=(switches_end - switches) / n)


@contextmanager
def _counts(n: int) -> Iterator[dict[str, float]]:
    """Figures of the block: SQLite calls and GIL hand-offs per message."""
    out: dict[str, float] = {}
    with counting() as tally:
        yield out
    out.update(calls=tally.calls / n, handoffs=tally.handoffs / n)


def measure(workload: Phase, sizes: Sizes, n: int, durability: Durability,
            phase: Callable[[int], Any]) -> dict[str, float]:
    """One fresh run of ``workload``, each of its phases measured by ``phase(n)``."""
    system = Sbroker(ServerPool(lambda _line: None))
    workdir = Path(tempfile.mkdtemp(prefix="sbroker-bench-cpu-"))
    try:
        system.setup(workdir, durability)
        try:
            return workload(system, sizes, lambda: phase(n))
        finally:
            system.teardown()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


ROWS = [("W1 send", w1_phases, "send"), ("W1 receive", w1_phases, "receive"),
        ("W3, per msg sent + received", w3_phase, "all")]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cpu", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("-n", type=int, default=3_000, help="messages per run (default 3,000)")
    p.add_argument("--durability", choices=("normal", "full"), default="normal")
    args = p.parse_args(argv)
    sizes = Sizes(w1=args.n, w2=0, w3=args.n, w4=0)
    table = Table(title=f"sbroker CPU per message ({args.n:,} msgs of {sizes.body} B, "
                        f"durability {args.durability}, median of {args.runs})",
                  title_justify="left")
    for col in ("workload", "CPU µs / msg", "of it in the kernel", "context switches / msg",
                "SQLite calls / msg", "GIL hand-offs / msg", "ceiling 1e6 / CPU (msgs/s)",
                "send (msgs/s)", "receive (msgs/s)"):
        table.add_column(col, justify="left" if col == "workload" else "right")
    timed: dict[Phase, list[dict[str, float]]] = {}
    counted: dict[Phase, dict[str, float]] = {}
    for workload in (w1_phases, w3_phase):
        timed[workload] = [measure(workload, sizes, args.n, args.durability, _cpu)
                           for _ in range(args.runs)]
        counted[workload] = measure(workload, sizes, args.n, args.durability, _counts)
    for name, workload, key in ROWS:
        runs = timed[workload]

        def med(figure: str, runs: list[dict[str, float]] = runs) -> float:
            return statistics.median(r[figure] for r in runs)

        cpu = med(f"{key}_cpu")
        table.add_row(name, f"{cpu:,.0f}", f"{med(f'{key}_sys_us'):,.0f}",
                      f"{med(f'{key}_switches'):.1f}", f"{counted[workload][f'{key}_calls']:.1f}",
                      f"{counted[workload][f'{key}_handoffs']:.1f}", f"{1e6 / cpu:,.0f}",
                      f"{med('send'):,.0f}" if key != "receive" else "",
                      f"{med('receive'):,.0f}" if key != "send" else "")
    Console(width=None if sys.stdout.isatty() else 150).print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
