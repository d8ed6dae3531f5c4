"""`python -m bench.attempt_cost`: what it costs per task attempt to be able to stop it.

The executor runs each attempt on a thread of its own that its reader can walk away from
(docs/design.md, "Stopping a task").  This prints, per attempt of a no-op task, the wall and
CPU time (this process and its children) of:
- ``inline``: the task called in the reader's thread (what the executor did before);
- ``attempt thread``: handed to the reader's attempt thread and waited for, with the
  executor's own ``Attempt`` and ``Reader`` (what it does now);
- ``thread each``: a new thread started and joined per attempt;
- ``prefork child``: sent to a child process forked once, over a pipe (no shared Spark
  session: a child cannot use the parent's py4j gateway);
- ``fork each``: a child forked per attempt and waited for (fewer rounds).
Ways take turns within each round; medians of ``--rounds``.

``--dag-against DIR``: also the 1,000-task DAG run (bench/pipeline_dag.py's ``fan_dag``, 4
readers) with this checkout's code and with the code in DIR (e.g. an export of main:
``git archive main src bench | tar -x -C DIR``), one process each, taking turns.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import os
import statistics
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

from bench.measure import ROOT, child_json, turns
from sbroker.apps.scheduler.attempts import Attempt, Reader


def noop() -> None:
    """The task."""


def inline(n: int) -> None:
    for _ in range(n):
        noop()


def attempt_thread(n: int) -> None:
    reader: Reader[None] = Reader("bench")
    try:
        for i in range(n):
            reader.run(Attempt(i, noop), stopping=None, stop_jobs=lambda _log_id: None)
    finally:
        reader.close()


def thread_each(n: int) -> None:
    for _ in range(n):
        t = threading.Thread(target=noop)
        t.start()
        t.join()


def _serve(conn: Connection) -> None:
    while conn.recv() is not None:
        conn.send(noop())


def prefork_child(n: int) -> None:
    ours, theirs = mp.Pipe()
    child = mp.get_context("fork").Process(target=_serve, args=(theirs,), daemon=True)
    child.start()
    for _ in range(n):
        ours.send(1)
        ours.recv()
    ours.send(None)
    child.join()


def fork_each(n: int) -> None:
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            noop()
            os._exit(0)
        os.waitpid(pid, 0)


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def per_attempt(ways: dict[str, tuple[Callable[[int], None], int]],
                rounds: int) -> dict[str, tuple[float, float]]:
    """µs of wall and CPU per attempt, median over rounds, the ways taking turns."""
    def timed(fn: Callable[[int], None], n: int) -> tuple[float, float]:
        c0, w0 = _cpu(), time.perf_counter()
        fn(n)
        return (time.perf_counter() - w0) / n * 1e6, (_cpu() - c0) / n * 1e6

    got = turns({k: functools.partial(timed, fn, n) for k, (fn, n) in ways.items()}, rounds)
    return {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
            for k, v in got.items()}


_DAG_RUN = """
import json, tempfile, time
from pathlib import Path
from bench import pipeline_dag as dag
from sbroker.apps.pipeline import start_run
b = dag._broker(Path(tempfile.mkdtemp()), "dag")
try:
    c0, w0 = time.process_time(), time.perf_counter()
    state = start_run(b, dag.fan_dag())
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    assert state.status == "succeeded", state.status
finally:
    b.close()
print(json.dumps([wall, cpu]))
"""


def dag_run(root: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one 1,000-task DAG run with the code under ``root``."""
    wall, cpu = child_json(["-W", "ignore", "-c", _DAG_RUN], root=root)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--attempts", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dag-against", type=Path, default=None, metavar="DIR")
    args = parser.parse_args()
    n = args.attempts
    ways = {"inline": (inline, n), "attempt thread": (attempt_thread, n),
            "thread each": (thread_each, n), "prefork child": (prefork_child, n),
            "fork each": (fork_each, max(20, n // 20))}
    print(f"load average before: {Path('/proc/loadavg').read_text().strip()}")
    for name, (wall, cpu) in per_attempt(ways, args.rounds).items():
        print(f"{name:15s} {wall:9.1f} µs wall {cpu:9.1f} µs CPU per attempt")
    if args.dag_against is not None:
        runs = turns({"this": lambda: dag_run(ROOT),
                      "other": lambda: dag_run(args.dag_against.resolve())}, args.rounds)
        for name, got in runs.items():
            where = ROOT if name == "this" else args.dag_against
            print(f"1,000-task DAG, {where}: {statistics.median(w for w, _ in got):.3f} s"
                  f" wall, {statistics.median(c for _, c in got):.3f} s CPU (median of"
                  f" {len(got)})")
    print(f"load average after: {Path('/proc/loadavg').read_text().strip()}")


if __name__ == "__main__":
    main()
