"""`python -m bench.scheduler`: the task scheduler's overhead per task, Spark through the
scheduler against a thread pool, fairness between a big and a small scheduler, and durable
pipeline runs (``bench/pipeline_dag.py``: ``--only dag``).

    python -m bench.scheduler            # everything (starts one local Spark session)
    python -m bench.scheduler --no-spark # overhead and fairness only, no JVM
    python -m bench.scheduler --only spark --runs 5   # one part (overhead, fairness, spark)
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import measure
from bench import pipeline_dag as dag
from bench.docs import table_file
from bench.pipeline_dag import NOOP, _broker
from bench.report import store
from bench.workloads import percentile
from sbroker.apps.spark import SparkConfig, SparkRunner, SparkSQL

QUERIES = [  # 40 small Spark SQL queries of a few shapes
    *(f"SELECT sum(id) AS s FROM range({10_000 * (i + 1)})" for i in range(10)),
    *(f"SELECT id % {i + 2} AS k, count(*) AS n FROM range(50000) GROUP BY 1" for i in range(10)),
    *(f"SELECT max(id * {i + 1}) AS m FROM range(20000)" for i in range(10)),
    *(f"SELECT count(DISTINCT id % {i + 3}) AS d FROM range(30000)" for i in range(10)),
]
WARMUP_PASSES = 6
READERS = 4  # the executor's max_queue_readers and the thread pool's size


def overhead(tmp: Path, runs: int) -> tuple[list[float], list[float]]:
    """ms per task: 1,000 no-op Python tasks in 10 stages of 100, 4 executor readers; wall
    time, and CPU time of the process (all its threads) over the same span."""
    wall, cpu = [], []
    for run in range(runs):
        runner = SparkRunner()  # no-op tasks never touch Spark: no JVM starts
        with _broker(tmp, f"overhead{run}", runner, 4) as b:
            start, cpu_start = time.perf_counter(), measure.cpu()
            with b.scheduler("bench") as s:
                for _stage in range(10):
                    for _ in range(100):
                        s.exec_async(NOOP)
                    s.wait_all()
            wall.append(time.perf_counter() - start)  # seconds per 1,000 = ms per task
            cpu.append(measure.cpu() - cpu_start)
        assert not runner.started, "a no-op task started Spark"
    return wall, cpu


def fairness(tmp: Path, runs: int) -> tuple[list[float], list[float]]:
    """Seconds for a scheduler's 3 tasks, alone and while another has 1,000 queued."""
    alone: list[float] = []
    contended: list[float] = []
    for run in range(runs):
        for big_tasks, out in ((0, alone), (1000, contended)):
            with _broker(tmp, f"fair{run}-{big_tasks}", SparkRunner(), 4) as b, \
                    b.scheduler("big") as big, b.scheduler("small") as small:
                for _ in range(big_tasks):
                    big.exec_async(NOOP)
                start = time.perf_counter()
                for _ in range(3):
                    small.exec_async(NOOP)
                small.wait_all()
                out.append(time.perf_counter() - start)
                if big_tasks:
                    big.wait_all()
    return alone, contended


class _Clock:
    """Wall time and CPU time of this process plus its local Spark JVM: the CPU figure does
    not depend on what else the machine runs, the wall figure does."""

    def __init__(self, spark: Any) -> None:
        self._jvm = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)

    def read(self) -> tuple[float, float]:
        alive = self._jvm is not None and self._jvm.poll() is None
        jvm = measure.cpu_of(self._jvm.pid) if alive else 0.0
        return time.perf_counter(), measure.cpu() + jvm


def _direct(spark: Any, clock: _Clock) -> tuple[float, float]:
    """(wall, CPU) seconds for the 40 queries from a thread pool of 4 on ``spark``."""
    wall, cpu = clock.read()
    with ThreadPoolExecutor(READERS) as pool:
        list(pool.map(lambda q: spark.sql(q).collect(), QUERIES))
    wall_end, cpu_end = clock.read()
    return wall_end - wall, cpu_end - cpu


class _Spans:
    """A runner that runs tasks on ``runner`` and notes when each reader thread ran them."""

    def __init__(self, runner: SparkRunner) -> None:
        self.runner = runner
        self.spans: list[tuple[int, float, float]] = []  # (thread, start, end)
        self._lock = threading.Lock()

    def run(self, task: Any, *, log_id: int, pool: str | None = None) -> Any:
        start = time.perf_counter()
        try:
            return self.runner.run(task, log_id=log_id, pool=pool)
        finally:
            with self._lock:
                self.spans.append((threading.get_ident(), start, time.perf_counter()))

    def cancel(self, log_id: int) -> bool:
        return self.runner.cancel(log_id)

    def progress(self, log_id: int) -> Any:
        return self.runner.progress(log_id)

    def close(self) -> None:
        self.runner.close()

    def idle(self, start: float, end: float, readers: int) -> tuple[float, float]:
        """Seconds each of ``readers`` readers waited, on average, between ``start`` and
        ``end``: before its first task, and between or after its tasks.  A reader that ran
        nothing waited the whole round."""
        by_thread: dict[int, list[tuple[float, float]]] = {}
        with self._lock:
            spans, self.spans = self.spans, []
        for thread, a, z in spans:
            if a >= start and z <= end:
                by_thread.setdefault(thread, []).append((a, z))
        before = (readers - len(by_thread)) * (end - start)
        later = 0.0
        for runs in by_thread.values():
            runs.sort()
            before += runs[0][0] - start
            later += (end - start) - (runs[0][0] - start) - sum(z - a for a, z in runs)
        return before / readers, later / readers


def _scheduled(s: Any, clock: _Clock) -> tuple[float, float]:
    """(wall, CPU) seconds for the 40 queries sent through scheduler ``s`` as one stage."""
    wall, cpu = clock.read()
    for q in QUERIES:
        s.exec_async(SparkSQL(q))
    s.wait_all()
    wall_end, cpu_end = clock.read()
    return wall_end - wall, cpu_end - cpu


def _scheduled_idle(s: Any, clock: _Clock, spans: _Spans) -> tuple[float, float, float, float]:
    """``_scheduled`` and the readers' mean idle seconds before their first task and later."""
    start = time.perf_counter()
    wall, cpu = _scheduled(s, clock)
    before, later = spans.idle(start, time.perf_counter(), READERS)
    return wall, cpu, before, later


@contextlib.contextmanager
def _spark_scheduler(tmp: Path, name: str, runner: SparkRunner | _Spans) -> Iterator[Any]:
    """A scheduler of a fresh broker whose executor runs on ``runner``'s session; closing
    the broker leaves the session running for the next round."""
    with _broker(tmp, name, runner, READERS) as b, b.scheduler(name) as s:
        yield s


def _warm_up(spark: Any, runner: SparkRunner, tmp: Path, clock: _Clock,
             passes: int) -> list[float]:
    """``passes`` passes over the queries, each through a thread pool and through a
    scheduler (whose SparkSQL runs ``take``, not ``collect``): JIT and whole-stage codegen
    make the first passes 2-3 times slower and keep shaving time off for several more,
    which would be charged to whichever side runs first.  The wall times seen."""
    seen: list[float] = []
    with _spark_scheduler(tmp, "warmup", runner) as s:
        for _ in range(passes):
            seen += [_direct(spark, clock)[0], _scheduled(s, clock)[0]]
    return seen


Timings = list[tuple[float, float]]  # (wall, CPU) seconds per round
# (wall, CPU, readers' mean idle before their first task, idle later) seconds per round
Rounds = list[tuple[float, float, float, float]]


def spark_ratio(tmp: Path, runs: int,
                warmup: int = WARMUP_PASSES) -> tuple[Rounds, Rounds, Timings, list[float]]:
    """The 40 queries through the scheduler from cold (no executor reader running yet:
    activation ramps up one reader per monitor interval: docs/activation.md) and warm (the
    readers still running from the round before), and from a thread pool of 4.

    Each run opens a fresh broker and goes thread pool, scheduler cold, scheduler warm,
    thread pool: the scheduler's rounds are compared with the mean of the two thread pool
    rounds around them, so that a drift of the machine or the JVM falls on both sides.
    Returns per-run cold and warm rounds (with the readers' idle time: what activation's
    ramp costs shows as idle before the first task), direct (the mean of the two) timings,
    and the warm-up passes' wall times.
    """
    runner = SparkRunner(SparkConfig(master="local[2]"))
    spark = runner.session()
    clock = _Clock(spark)
    spans = _Spans(runner)
    cold: Rounds = []
    warm: Rounds = []
    direct: Timings = []
    try:
        seen = _warm_up(spark, runner, tmp, clock, warmup)
        for run in range(runs):
            before = _direct(spark, clock)
            with _spark_scheduler(tmp, f"spark{run}", spans) as s:
                cold.append(_scheduled_idle(s, clock, spans))
                warm.append(_scheduled_idle(s, clock, spans))
            after = _direct(spark, clock)
            direct.append(((before[0] + after[0]) / 2, (before[1] + after[1]) / 2))
    finally:
        runner.close()
    return cold, warm, direct, seen


def _dag(tmp: Path, runs: int, add: Any) -> None:
    """Durable pipeline runs (see bench/pipeline_dag.py)."""
    print("DAG: 1,000 no-op tasks (fan-out 99 -> join, x10) vs 10 stages of 100 vs a"
                  " thread pool of 4; a 200-task chain; resuming a 1,000-task run ...")
    per_task = dag.overhead(tmp, runs)
    add("durable DAG run, per task", per_task["dag"], "ms")
    add("the same as 10 stages (durable run), per task", per_task["stages"], "ms")
    add("thread pool of 4, bare functions, per task", per_task["pool"], "ms", digits=4)
    gaps = dag.latency(tmp, runs)
    add("dependency success -> dependant start, p50", [percentile(gaps, 50)], "ms", digits=1)
    add("dependency success -> dependant start, p99", [percentile(gaps, 99)], "ms", digits=1)
    add("resume of a 1,000-task run -> first task start", dag.resume_cost(tmp, runs), "ms",
        digits=0)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scheduler", description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark comparison")
    parser.add_argument("--warmup", type=int, default=WARMUP_PASSES,
                        help=f"Spark warm-up passes before measuring (default {WARMUP_PASSES})")
    parser.add_argument("--only", choices=("overhead", "fairness", "spark", "dag"),
                        action="append",
                        help="run only this part (repeatable)")
    parser.add_argument("--no-json", action="store_true",
                        help="do not write bench/results/scheduler-latest.json")
    argv = sys.argv[1:]
    args = parser.parse_args(argv)
    if args.runs < 1 or args.warmup < 0:
        parser.error("--runs must be at least 1 and --warmup at least 0")
    parts = set(args.only or ("overhead", "fairness", "spark", "dag"))
    if args.no_spark:
        parts.discard("spark")
    stored: list[dict[str, object]] = []  # what bench/results/scheduler-latest.json keeps
    data = {"started": datetime.now(UTC).isoformat(), "rows": stored,
            "command": " ".join(["python -m bench.scheduler", *argv])}

    def add(figure: str, values: list[float], unit: str, target: str = "",
            digits: int = 2) -> None:
        stored.append({"figure": figure, "unit": unit, "values": values, "target": target,
                       "digits": digits})

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if "overhead" in parts:
            print("overhead: 1,000 no-op tasks, 10 stages of 100, 4 readers ...")
            wall, cpu = overhead(tmp, args.runs)
            add("overhead per task", wall, "ms", "<= 2 ms")
            add("CPU per task (all threads)", cpu, "ms")
        if "fairness" in parts:
            print("fairness: 3 tasks alone, then behind a scheduler with 1,000 queued")
            alone, contended = fairness(tmp, args.runs)
            add("small scheduler alone", alone, "s", digits=3)
            add("small scheduler with a big one", contended, "s", "close to alone", 3)
        if "dag" in parts:
            _dag(tmp, args.runs, add)
        if "spark" in parts:
            print("Spark: 40 small SQL queries, scheduler vs thread pool of 4 ...")
            cold, warm, direct, warmup = spark_ratio(tmp, args.runs, args.warmup)
            print(f"  warm-up passes (thread pool, scheduler; s): "
                          f"{' '.join(f'{w:.2f}' for w in warmup)}")
            for label, walls in (("scheduler from cold", [r[0] for r in cold]),
                                 ("scheduler with readers running", [r[0] for r in warm]),
                                 ("from a thread pool of 4 (mean of 2 around)",
                                  [t[0] for t in direct])):
                add(f"40 queries, {label}", walls, "s")
            for label, rounds in (("cold", cold), ("warm", warm)):
                for what, i in (("wall", 0), ("CPU, Python + JVM", 1)):
                    ratios = [t[i] / d[i] for t, d in zip(rounds, direct, strict=True)]
                    add(f"ratio scheduler ({label}) / thread pool, {what}", ratios, "x",
                        "<= 1.1" if i == 0 else "")
            for label, rounds in (("cold", cold), ("warm", warm)):
                add(f"a reader's idle before its first task ({label})",
                    [r[2] * 1000 for r in rounds], "ms", digits=0)
                add(f"a reader's idle between and after tasks ({label})",
                    [r[3] * 1000 for r in rounds], "ms", digits=0)
    print("\n".join(table_file("sbroker task scheduler, durability normal",
                                "python -m bench.scheduler", "scheduler-latest.json", data)))
    if not args.no_json:
        store("scheduler-latest.json", data)


if __name__ == "__main__":
    main()
