"""Issue 54's benchmark: a task mapped over 1,000 no-op items (``map=`` in a Python
pipeline), against the same 1,000 tasks written out in TOML, Prefect 3's ``.map`` and
Dagster's ``DynamicOut``, on this machine in one run.

    python -m bench.pipeline_map                 # 1,000 items, 3 rounds
    python -m bench.pipeline_map --items 200 --runs 5 --only sbroker-map --only prefect

Every system runs the same shape: one task returns the list of items, a no-op runs once per
item (four at a time: the executor's readers, Prefect's thread pool; Dagster's in-process
executor runs one op at a time), one task takes the list of their results. Each measurement
runs in a fresh process of its own (``--one SYSTEM``) after a warm-up run of 10 items in that
process (Prefect's temporary API server started, the broker's executor running), and times
the run alone: wall time and this process's CPU time. The systems take turns in each round;
figures are medians over the rounds, with the load average printed beside them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

import sbroker
from bench import measure

SYSTEMS = ("sbroker-map", "sbroker-toml", "prefect", "dagster")
WORKERS = 4
WARMUP = 10
console = Console()

# -- sbroker: the mapped task of a Python pipeline ---------------------------------------------
pipe = sbroker.Pipeline("map_bench", concurrency=WORKERS)


@pipe.task()
def items(count: int = 1000) -> list[int]:
    return list(range(count))


@pipe.task(map=items)
def each(item: int) -> int:
    return item


@pipe.task(after=[each])
def collect(each: list[int]) -> int:
    return len(each)


def toml_text(count: int) -> str:
    """The same tasks written out: ``count`` no-ops after ``items``, ``collect`` after all."""
    lines = ['[pipeline]\nname = "map_bench_toml"\n', f"[options]\nconcurrency = {WORKERS}\n",
             '[[task]]\nname = "items"\npython = "bench.tasks:noop"\n']
    lines += [f'[[task]]\nname = "each{i}"\npython = "bench.tasks:noop"\nafter = ["items"]\n'
              for i in range(count)]
    names = ", ".join(f'"each{i}"' for i in range(count))
    lines.append(f'[[task]]\nname = "collect"\npython = "bench.tasks:noop"\nafter = [{names}]\n')
    return "\n".join(lines)


def _sbroker(count: int, python: bool) -> Callable[[int], None]:
    """A runner of the pipeline (``count`` items) on a broker made once for the process."""
    from bench.pipeline_dag import _broker
    from sbroker.apps.pipeline import parse_pipeline, start_run

    tmp = Path(tempfile.mkdtemp(prefix="bench-map-"))
    broker = _broker(tmp, "map", readers=WORKERS)  # no-op tasks: no JVM

    def run(n: int) -> None:
        model = (pipe.definition({"count": n}) if python
                 else parse_pipeline(toml_text(n), path=tmp / "map.toml"))
        state = start_run(broker, model)
        assert state.status == "succeeded", {k: t.error for k, t in state.tasks.items()}
        if python:
            assert state.tasks["collect"].value == n, state.tasks["collect"].value

    return run


def _prefect() -> Callable[[int], None]:
    os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="bench-prefect-"))
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    from prefect import flow, task
    from prefect.task_runners import ThreadPoolTaskRunner

    @task
    def p_items(count: int) -> list[int]:
        return list(range(count))

    @task
    def p_each(item: int) -> int:
        return item

    @task
    def p_collect(values: list[int]) -> int:
        return len(values)

    @flow(task_runner=ThreadPoolTaskRunner(max_workers=WORKERS))  # type: ignore[arg-type]
    def mapped(count: int) -> int:
        values = p_items(count)
        return p_collect([f.result() for f in p_each.map(values)])  # type: ignore[no-any-return]

    def run(n: int) -> None:
        assert mapped(n) == n

    return run


def _dagster() -> Callable[[int], None]:
    from dagster import DynamicOut, DynamicOutput, job, op

    @op(out=DynamicOut(), config_schema={"count": int})
    def d_items(context):  # type: ignore[no-untyped-def]  # dagster: a bare context
        for i in range(context.op_config["count"]):
            yield DynamicOutput(i, mapping_key=str(i))

    @op
    def d_each(item: int) -> int:
        return item

    @op
    def d_collect(values: list[int]) -> int:
        return len(values)

    @job
    def mapped() -> None:
        d_collect(d_items().map(d_each).collect())

    def run(n: int) -> None:
        result = mapped.execute_in_process(
            run_config={"ops": {"d_items": {"config": {"count": n}}}})
        assert result.success and result.output_for_node("d_collect") == n

    return run


def _cpu() -> float:
    """CPU seconds of this process and of the processes it started that still run (Prefect's
    temporary API server): read from /proc, Linux's."""
    stats: dict[int, list[str]] = {}
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):  # it exited meanwhile
            stats[int(proc.name)] = measure.stat(int(proc.name))
    mine, grew = {os.getpid()}, True
    while grew:
        new = {pid for pid, st in stats.items() if int(st[1]) in mine and pid not in mine}
        mine |= new
        grew = bool(new)
    ticks = sum(int(stats[pid][11]) + int(stats[pid][12]) for pid in mine - {os.getpid()})
    return measure.cpu() + ticks / measure.TICK


def one(system: str, count: int) -> dict[str, float]:
    """Warm up, then time one run of ``count`` items in this process."""
    run = {"sbroker-map": lambda: _sbroker(count, True),
           "sbroker-toml": lambda: _sbroker(count, False),
           "prefect": _prefect, "dagster": _dagster}[system]()
    run(WARMUP)
    cpu, start = _cpu(), time.perf_counter()
    run(count)
    return {"seconds": time.perf_counter() - start, "cpu": _cpu() - cpu}


def _measure(system: str, count: int) -> dict[str, float] | str:
    """One measurement in a fresh process; the error's last line when it failed."""
    try:
        got: dict[str, float] = measure.child_json(
            ["-m", "bench.pipeline_map", "--one", system, "--items", str(count)])
    except subprocess.CalledProcessError as exc:
        return ((exc.stderr or "").strip() or (exc.stdout or "").strip() or "failed"
                ).splitlines()[-1]
    return got


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", action="append", choices=SYSTEMS)
    parser.add_argument("--one", choices=SYSTEMS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.items)))
        return 0
    systems = args.only or list(SYSTEMS)
    results: dict[str, list[dict[str, float]]] = {s: [] for s in systems}
    errors: dict[str, str] = {}
    loads = [os.getloadavg()[0]]
    for round_ in range(args.runs):
        for system in systems:
            got = _measure(system, args.items)
            if isinstance(got, str):
                errors[system] = got
            else:
                results[system].append(got)
            console.print(f"round {round_ + 1}/{args.runs} {system}: {got}", highlight=False)
        loads.append(os.getloadavg()[0])
    _report(results, errors, args.items, loads)
    return 1 if errors else 0


def _report(results: dict[str, list[dict[str, float]]], errors: dict[str, str], count: int,
            loads: list[float]) -> None:
    table = Table(title=f"A task mapped over {count:,} no-op items (medians, {WORKERS} "
                        "workers)")
    for column in ("system", "wall s", "ms / item", "CPU s", "CPU ms / item", "runs",
                   "x sbroker-map"):
        table.add_column(column, justify="left" if column == "system" else "right",
                         no_wrap=column == "system")
    base = results.get("sbroker-map")
    base_s = statistics.median(r["seconds"] for r in base) if base else None
    for system, runs in results.items():
        if not runs:
            table.add_row(system, "-", "-", "-", "-", "0", errors.get(system, ""))
            continue
        wall = statistics.median(r["seconds"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        table.add_row(system, f"{wall:.2f}", f"{wall * 1000 / count:.2f}", f"{cpu:.2f}",
                      f"{cpu * 1000 / count:.2f}", str(len(runs)),
                      f"{wall / base_s:.2f}" if base_s else "-")
    console.print(table)
    console.print(f"load average (1 min) before and after each round: "
                  f"{', '.join(f'{x:.2f}' for x in loads)}", highlight=False)
    for system, error in errors.items():
        console.print(f"{system} failed: {error}", highlight=False)


if __name__ == "__main__":
    sys.exit(main())
