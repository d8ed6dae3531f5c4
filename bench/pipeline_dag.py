"""Durable pipeline runs of no-op tasks on the broker (run from ``python -m bench.scheduler
--only dag``; docs/pipelines.md).

- overhead per task of a 1,000-task DAG (fan-out 100 -> fan-in 1, ten times), against the
  same tasks as ten stages of 100, and against a thread pool of 4 running the bare functions
  wave by wave;
- the time from a dependency's success (its ExecutionLog EndTime) to its dependant's start
  (StartTime), over a chain of 200 tasks: p50 and p99;
- resume cost: from ``resume_run`` to the first task starting, for a run of 1,000 tasks.
"""

from __future__ import annotations

import datetime as dt
import itertools
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import sbroker
from bench.measure import turns
from bench.tasks import noop
from sbroker.apps.pipeline import (
    Options,
    Pipeline,
    RunListener,
    RunState,
    Stage,
    TaskSpec,
    TaskState,
    resume_run,
    run_attempts,
    start_run,
)
from sbroker.apps.spark import PythonTask, SparkRunner

BLOCKS, FAN = 10, 99  # ten times: 99 tasks side by side, then one after all of them
READERS = 4
NOOP = PythonTask("bench.tasks:noop")


def _broker(tmp: Path, name: str, runner: Any = None, readers: int = READERS
            ) -> sbroker.Broker:
    """A started broker whose executor runs ``readers`` readers on ``runner`` (by default a
    SparkRunner, which no-op tasks never start: no JVM); closed on leaving ``with``."""
    b = sbroker.Broker.open(tmp / f"{name}.db", monitor_interval=0.2)
    b.install_executor(max_queue_readers=readers, runner=runner or SparkRunner())
    b.start()
    return b


def fan_dag(last: PythonTask = NOOP) -> Pipeline:
    """1,000 tasks: ten blocks of 99 after the previous join, then a join after them."""
    tasks: list[TaskSpec] = []
    join: tuple[str, ...] = ()
    for b in range(BLOCKS):
        fan = [TaskSpec(f"b{b}t{i}", NOOP, after=join) for i in range(FAN)]
        final = last if b == BLOCKS - 1 else NOOP
        tasks += [*fan, TaskSpec(f"b{b}join", final, after=tuple(t.name for t in fan))]
        join = (f"b{b}join",)
    return Pipeline("dag", (), Options(), tasks=tuple(tasks))


def staged() -> Pipeline:
    """The same 1,000 no-op tasks as ten stages of 100."""
    stages = tuple(Stage(f"s{s}", tuple(TaskSpec(f"t{i}", NOOP) for i in range(100)))
                   for s in range(BLOCKS))
    return Pipeline("stages", stages, Options())


def _timed_run(tmp: Path, name: str, pipeline: Pipeline) -> float:
    with _broker(tmp, name) as b:
        start = time.perf_counter()
        state = start_run(b, pipeline)
        elapsed = time.perf_counter() - start
    assert state.status == "succeeded", state.status
    return elapsed * 1000 / len(pipeline.dag)


def _thread_pool() -> float:
    """ms per task: the bare functions on 4 threads, each wave after the one before."""
    start = time.perf_counter()
    with ThreadPoolExecutor(READERS) as pool:
        for _ in range(BLOCKS):
            list(pool.map(lambda _i: noop(None), range(FAN)))
            pool.submit(noop, None).result()
    return (time.perf_counter() - start) * 1000 / (BLOCKS * (FAN + 1))


def overhead(tmp: Path, runs: int) -> dict[str, list[float]]:
    """ms per task for the DAG, the stages and the thread pool, paired run by run."""
    names = itertools.count()
    return turns({"dag": lambda: _timed_run(tmp, f"dag{next(names)}", fan_dag()),
                  "stages": lambda: _timed_run(tmp, f"stages{next(names)}", staged()),
                  "pool": _thread_pool}, runs)


def _t(text: Any) -> float:
    return dt.datetime.fromisoformat(str(text)).timestamp()


def latency(tmp: Path, runs: int, length: int = 200) -> list[float]:
    """ms from each task's success to its dependant's start along a chain, all runs."""
    chain = tuple(TaskSpec(f"c{i}", NOOP, after=(f"c{i - 1}",) if i else ())
                  for i in range(length))
    gaps: list[float] = []
    for run in range(runs):
        with _broker(tmp, f"chain{run}") as b:
            state = start_run(b, Pipeline("chain", (), Options(), tasks=chain))
            rows = {a["task"]: a for a in run_attempts(b, state.run_id)}
        gaps += [(_t(rows[f"c{i}"]["start_time"]) - _t(rows[f"c{i - 1}"]["end_time"]))
                 * 1000 for i in range(1, length)]
    return gaps


class _FirstStart(RunListener):
    def __init__(self) -> None:
        self.at: float | None = None

    def task_started(self, run: RunState, task: TaskState) -> None:
        if self.at is None:
            self.at = time.perf_counter()


def resume_cost(tmp: Path, runs: int) -> list[float]:
    """ms from ``resume_run`` to its first task start, for a 1,000-task run whose last
    task failed (999 kept)."""
    out: list[float] = []
    pipeline = fan_dag(last=PythonTask("bench.tasks:fail"))
    for run in range(runs):
        with _broker(tmp, f"resume{run}") as b:
            first = start_run(b, pipeline)
            assert first.status == "failed"
            listener = _FirstStart()
            start = time.perf_counter()
            resume_run(b, pipeline, first.run_id, listener=listener)
        assert listener.at is not None
        out.append((listener.at - start) * 1000)
    return out
