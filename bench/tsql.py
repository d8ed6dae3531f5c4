"""`python -m bench.tsql`: a T-SQL loop of SEND then RECEIVE (each its own transaction, as
T-SQL's autocommit runs them) against the same loop through the Python API, on SQLite and on
PostgreSQL (docs/tsql.md).  Printed, not asserted.

    python -m bench.tsql                      # 10,000 messages, 3 paired runs, both backends
    python -m bench.tsql --n 1000 --runs 1 --backend sqlite

Each run opens a fresh database (a SQLite file in a temp folder with durability "normal", the
WAL default; a new database of a throwaway PostgreSQL server started by tools/pgserver.py with
its defaults); the two ways take turns within each run; the figure is the median.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from bench.measure import turns
from bench.servers import databases
from sbroker import Broker

BODY = "x" * 200
LOOP = """
declare @h uniqueidentifier, @i int = 0, @b varbinary(max)
begin dialog @h from service Init to service 'Target' with encryption = off
while @i < $(N)
begin
    send on conversation @h (N'$(BODY)')
    receive top (1) @b = message_body from TargetQ
    set @i += 1
end
"""


def prepare(b: Broker) -> None:
    b.create_queue("InitQ")
    b.create_queue("TargetQ")
    b.create_service("Init", "InitQ")
    b.create_service("Target", "TargetQ", ["DEFAULT"])


def tsql_loop(b: Broker, n: int) -> None:
    b.execute_tsql(LOOP, variables={"N": str(n), "BODY": BODY})


def python_loop(b: Broker, n: int) -> None:
    with b.transaction() as tx:
        handle = tx.begin_dialog("Init", "Target")
    for _ in range(n):
        with b.transaction() as tx:
            tx.send(handle, body=BODY)
        with b.transaction() as tx:
            tx.receive("TargetQ", top=1)


def timed(target: str, loop: Callable[[Broker, int], None], n: int) -> float:
    """Messages per second of ``loop`` on a fresh database."""
    with Broker.open(target) as b:
        prepare(b)
        start = time.perf_counter()
        loop(b, n)
        elapsed = time.perf_counter() - start
    return n / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    args = parser.parse_args()
    backends = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    with Broker.open(":memory:") as warm:  # imports (sqlglot) are not part of any figure
        warm.execute_tsql("select 1 as warm")
    print(f"SEND then RECEIVE, one transaction each, {args.n:,} messages of {len(BODY)} bytes,"
          f" median of {args.runs} paired runs (msgs/s)")
    print(f"{'backend':<10} {'T-SQL':>10} {'Python':>10} {'T-SQL/Python':>13}")
    for backend in backends:
        with databases(backend) as new:
            figures = turns({"tsql": lambda: timed(new("bench"), tsql_loop, args.n),
                             "python": lambda: timed(new("bench"), python_loop, args.n)},
                            args.runs)
        tsql = statistics.median(figures["tsql"])
        python = statistics.median(figures["python"])
        print(f"{backend:<10} {tsql:>10,.0f} {python:>10,.0f} {tsql / python:>13.2f}",
              flush=True)


if __name__ == "__main__":
    main()
