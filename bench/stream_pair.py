"""Issue 37's paired benchmark: the stream source and sink on two PySpark and sbroker
versions, in one run, taking turns on the same machine.

    python -m bench.stream_pair --before /work/venv401/bin/python /work/before401/src
    python -m bench.stream_pair --before PY SRC --batches 1000 10000 --runs 3

Each side is ``python -m bench.stream --serve`` (one local[2] Spark each, started once and
warmed): "before" runs the interpreter and source tree given (e.g. PySpark 4.0.1 and the code
of the commit before issue 37), "after" this interpreter and this tree. For each batch size,
sink and run the two sides run the same throughput() one after the other, the side that goes
first alternating by run; the table shows each side's msgs/s (median of the runs), their
ratio, and every run's figures. Printed, never asserted: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from rich.console import Console
from rich.table import Table

from bench.stream import MESSAGES

console = Console(width=150)
ROOT = Path(__file__).resolve().parent.parent


class Side:
    """One ``bench.stream --serve`` process: a Spark of its own, asked one run at a time."""

    def __init__(self, name: str, python: str, src: str) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, str(ROOT)]),
                   PYSPARK_PYTHON=python)
        self.name = name
        self.process = subprocess.Popen([python, "-m", "bench.stream", "--serve"], cwd=ROOT,
                                        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)
        self.versions = str(self._answer()["ready"])

    def _answer(self) -> dict[str, Any]:
        out: IO[str] | None = self.process.stdout
        assert out is not None
        line = out.readline()
        if not line:
            raise RuntimeError(f"the {self.name} side ended (exit {self.process.wait()})")
        return dict(json.loads(line))

    def run(self, per_batch: int, sink: str, n: int) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"per_batch": per_batch, "sink": sink, "n": n})
                                 + "\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.stream_pair", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", nargs=2, metavar=("PYTHON", "SRC"), required=True)
    parser.add_argument("--batches", type=int, nargs="+", default=sorted(MESSAGES))
    parser.add_argument("--sinks", nargs="+", default=["noop", "sbroker"])
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    sides = [Side("before", *args.before), Side("after", sys.executable, str(ROOT / "src"))]
    table = Table(title="stream throughput, paired: " + "; ".join(
        f"{s.name}: {s.versions}" for s in sides))
    for col in ("per batch", "sink", "messages", "before msgs/s", "after msgs/s",
                "after / before", "runs (before | after)"):
        table.add_column(col)
    try:
        for per_batch in args.batches:
            n = MESSAGES.get(per_batch, 3 * per_batch)
            for sink in args.sinks:
                seen: dict[str, list[float]] = {s.name: [] for s in sides}
                for run in range(args.runs):
                    for side in sides if run % 2 == 0 else sides[::-1]:
                        console.print(f"{side.name}: {n:,} messages, {per_batch:,} per batch "
                                      f"-> {sink} (run {run + 1})")
                        seen[side.name].append(side.run(per_batch, sink, n)["msgs/s"])
                before, after = (statistics.median(seen[s.name]) for s in sides)
                table.add_row(f"{per_batch:,}", sink, f"{n:,}", f"{before:,.0f}",
                              f"{after:,.0f}", f"{after / before:.2f}",
                              " ".join(f"{v:,.0f}" for v in seen["before"]) + " | "
                              + " ".join(f"{v:,.0f}" for v in seen["after"]))
                console.print(table)
    finally:
        for side in sides:
            side.close()
    console.print(table)


if __name__ == "__main__":
    main()
