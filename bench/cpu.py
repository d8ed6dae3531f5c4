"""`python -m bench.cpu`: sbroker's CPU per message in W1 and W3, and the ceiling it sets.

Issue 6 holds W3 (8 producers + 8 consumers, one message per transaction) to 3x sbroker's own
W1.  Every broker transaction runs Python, and one process runs Python on one core at a time
(the GIL), so W3 can move at most 1 / (CPU seconds per message sent and received) messages per
second, however the commits are grouped.  This prints that CPU time for W1 and W3 (all threads
of this process, median of --runs), the ceiling it implies, and the rates measured in the same
runs.  CPU time does not depend on what else the machine runs; the rates do.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.servers import ServerPool
from bench.systems import Durability, System
from bench.systems.sbroker import Sbroker
from bench.workloads import Sizes, w1, w3


def _usage() -> tuple[float, float, int]:
    """(CPU seconds, of them in the kernel, context switches) of every thread so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (usage.ru_utime + usage.ru_stime, usage.ru_stime,
            usage.ru_nvcsw + usage.ru_nivcsw)


def measure(workload: Callable[[System, Sizes], dict[str, float]], sizes: Sizes, n: int,
            durability: Durability) -> tuple[float, dict[str, float]]:
    """(CPU µs per message sent and received, the workload's figures) for one fresh run.
    The figures gain ``sys_us`` (kernel CPU µs per message) and ``switches`` (context
    switches of the process per message: threads waiting for the GIL or for the writer)."""
    system = Sbroker(ServerPool(lambda _line: None))
    workdir = Path(tempfile.mkdtemp(prefix="sbroker-bench-cpu-"))
    try:
        system.setup(workdir, durability)
        try:
            cpu, sys_cpu, switches = _usage()
            figures = workload(system, sizes)
            cpu_end, sys_end, switches_end = _usage()
            figures["sys_us"] = (sys_end - sys_cpu) / n * 1e6
            figures["switches"] = (switches_end - switches) / n
            return (cpu_end - cpu) / n * 1e6, figures
        finally:
            system.teardown()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


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
                "ceiling 1e6 / CPU (msgs/s)", "send (msgs/s)", "receive (msgs/s)"):
        table.add_column(col, justify="left" if col == "workload" else "right")
    for name, workload in (("W1", w1), ("W3", w3)):
        runs = [measure(workload, sizes, args.n, args.durability) for _ in range(args.runs)]
        cpu = statistics.median(r[0] for r in runs)
        send = statistics.median(r[1]["send"] for r in runs)
        receive = statistics.median(r[1]["receive"] for r in runs)
        sys_us = statistics.median(r[1]["sys_us"] for r in runs)
        switches = statistics.median(r[1]["switches"] for r in runs)
        table.add_row(name, f"{cpu:,.0f}", f"{sys_us:,.0f}", f"{switches:.1f}", f"{1e6 / cpu:,.0f}",
                      f"{send:,.0f}", f"{receive:,.0f}")
    Console().print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
