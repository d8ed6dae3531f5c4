"""Issue 5's benchmarks: scheduler overhead, Spark through the scheduler vs a thread pool,
and fairness between a big and a small scheduler.

    python -m bench.scheduler            # everything (starts one local Spark session)
    python -m bench.scheduler --no-spark # overhead and fairness only, no JVM
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import sbroker
from sbroker.spark import PythonTask, SparkConfig, SparkRunner, SparkSQL

console = Console()
QUERIES = [  # 40 small Spark SQL queries of a few shapes
    *(f"SELECT sum(id) AS s FROM range({10_000 * (i + 1)})" for i in range(10)),
    *(f"SELECT id % {i + 2} AS k, count(*) AS n FROM range(50000) GROUP BY 1" for i in range(10)),
    *(f"SELECT max(id * {i + 1}) AS m FROM range(20000)" for i in range(10)),
    *(f"SELECT count(DISTINCT id % {i + 3}) AS d FROM range(30000)" for i in range(10)),
]


def _broker(tmp: Path, name: str, runner: Any, readers: int) -> sbroker.Broker:
    b = sbroker.Broker.open(tmp / f"{name}.db", monitor_interval=0.2)
    b.install_executor(max_queue_readers=readers, runner=runner)
    b.start()
    return b


def overhead(tmp: Path, runs: int) -> list[float]:
    """ms per task: 1,000 no-op Python tasks in 10 stages of 100, 4 executor readers."""
    figures = []
    for run in range(runs):
        runner = SparkRunner()  # no-op tasks never touch Spark: no JVM starts
        b = _broker(tmp, f"overhead{run}", runner, 4)
        try:
            start = time.perf_counter()
            with b.scheduler("bench") as s:
                for _stage in range(10):
                    for _ in range(100):
                        s.exec_async(PythonTask("bench.tasks:noop"))
                    s.wait_all()
            figures.append((time.perf_counter() - start) / 1000 * 1000)
            assert not runner.started, "a no-op task started Spark"
        finally:
            b.close()
    return figures


def fairness(tmp: Path, runs: int) -> tuple[list[float], list[float]]:
    """Seconds for a scheduler's 3 tasks, alone and while another has 1,000 queued."""
    alone, contended = [], []
    for run in range(runs):
        for big_tasks, out in ((0, alone), (1000, contended)):
            b = _broker(tmp, f"fair{run}-{big_tasks}", SparkRunner(), 4)
            try:
                with b.scheduler("big") as big, b.scheduler("small") as small:
                    for _ in range(big_tasks):
                        big.exec_async(PythonTask("bench.tasks:noop"))
                    start = time.perf_counter()
                    for _ in range(3):
                        small.exec_async(PythonTask("bench.tasks:noop"))
                    small.wait_all()
                    out.append(time.perf_counter() - start)
                    if big_tasks:
                        big.wait_all()
            finally:
                b.close()
    return alone, contended


def spark_ratio(tmp: Path, runs: int) -> tuple[list[float], list[float], list[float]]:
    """Seconds for the 40 queries through the scheduler from cold (no executor reader
    running yet: activation ramps up one reader per monitor interval, as seed 001 says) and
    warm (readers already running after a first stage), and from a thread pool of 4."""
    runner = SparkRunner(SparkConfig(master="local[2]"))
    spark = runner.session()
    for q in QUERIES[:4]:  # warm the JVM up before timing anything
        spark.sql(q).collect()
    cold, warm, direct = [], [], []
    try:
        for run in range(runs):
            b = _broker(tmp, f"spark{run}", runner, 4)
            try:
                with b.scheduler("spark") as s:
                    start = time.perf_counter()
                    for q in QUERIES:
                        s.exec_async(SparkSQL(q))
                    s.wait_all()
                    cold.append(time.perf_counter() - start)
                    start = time.perf_counter()  # the readers are running now
                    for q in QUERIES:
                        s.exec_async(SparkSQL(q))
                    s.wait_all()
                    warm.append(time.perf_counter() - start)
            finally:
                b._executor_state = None  # type: ignore[attr-defined]  # keep the session
                b.close()
            start = time.perf_counter()
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda q: spark.sql(q).collect(), QUERIES))
            direct.append(time.perf_counter() - start)
    finally:
        runner.close()
    return cold, warm, direct


def _fmt(values: list[float], unit: str, digits: int = 2) -> str:
    return (f"{statistics.median(values):.{digits}f} {unit} "
            f"(min {min(values):.{digits}f}, max {max(values):.{digits}f}, n={len(values)})")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scheduler", description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark comparison")
    args = parser.parse_args()
    table = Table(title="sbroker task scheduler (durability=normal)")
    for col in ("benchmark", "figure", "target"):
        table.add_column(col)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        console.print("overhead: 1,000 no-op tasks, 10 stages of 100, 4 readers ...")
        ms = overhead(tmp, args.runs)
        table.add_row("overhead per task", _fmt(ms, "ms"), "<= 2 ms")
        console.print("fairness: 3 tasks alone, then behind a scheduler with 1,000 queued ...")
        alone, contended = fairness(tmp, args.runs)
        table.add_row("small scheduler alone", _fmt(alone, "s", 3), "")
        table.add_row("small scheduler with a big one", _fmt(contended, "s", 3),
                      "close to alone")
        if not args.no_spark:
            console.print("Spark: 40 small SQL queries, scheduler vs thread pool of 4 ...")
            cold, warm, direct = spark_ratio(tmp, args.runs)
            table.add_row("40 queries, scheduler from cold", _fmt(cold, "s"), "")
            table.add_row("40 queries, scheduler with readers running", _fmt(warm, "s"), "")
            table.add_row("40 queries from a thread pool of 4", _fmt(direct, "s"), "")
            for label, values in (("cold", cold), ("warm", warm)):
                ratios = [t / d for t, d in zip(values, direct, strict=True)]
                table.add_row(f"ratio scheduler ({label}) / thread pool", _fmt(ratios, "x"),
                              "<= 1.1")
    console.print(table)


if __name__ == "__main__":
    main()
