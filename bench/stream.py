"""`python -m bench.stream`: broker queues through Spark Structured Streaming (docs/stream.md),
local[2].

    python -m bench.stream                      # throughput and latency (one local Spark)
    python -m bench.stream --only throughput --batches 10000 100000
    python -m bench.stream --only latency

Throughput: a queue filled beforehand with messages of 200 B on 50 conversations, read by a
streaming query with ``maxMessagesPerBatch`` 1,000 / 10,000 / 100,000 into Spark's no-op sink
and into the sbroker sink (one conversation per source conversation, another queue of the
same database). msgs/s counts from the second micro-batch's start to the last one's end: the
steady state, where each batch also receives the one before (the start-up and the first
batch are printed apart); each micro-batch's phases (Spark's durationMs, medians) show where
the time goes. Latency: a trigger of ``processingTime="0 seconds"``, messages sent one by one
while the query runs; from a message's send commit to the sink's commit of it (its
enqueue_time in the target queue). Durability "normal" (WAL, no fsync per commit). Printed,
never asserted: the machine is shared.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import sbroker
from bench.workloads import body
from sbroker.spark import SparkConfig, create_session, register

console = Console(width=150)
CONVERSATIONS = 50
BODY = 200
MESSAGES = {1_000: 20_000, 10_000: 100_000, 100_000: 400_000}  # per batch -> messages sent
PHASES = ("latestOffset", "walCommit", "queryPlanning", "addBatch", "commitOffsets")


def fresh(tmp: Path, name: str) -> tuple[sbroker.Broker, str]:
    """A database with Src (initiator), In (the stream's queue) and Out (the sink's)."""
    url = str(tmp / f"{name}.db")
    b = sbroker.Broker.open(url)
    for queue in ("Src", "In", "Out"):
        b.create_queue(queue)
    b.create_service("Src", "Src")
    b.create_service("In", "In", ["DEFAULT"])
    b.create_service("Out", "Out", ["DEFAULT"])
    return b, url


def fill(b: sbroker.Broker, n: int, per_tx: int = 5_000) -> None:
    """``n`` messages of BODY bytes on CONVERSATIONS conversations into In."""
    with b.transaction() as tx:
        handles = [tx.begin_dialog("Src", "In") for _ in range(CONVERSATIONS)]
    for start in range(0, n, per_tx):
        with b.transaction() as tx:
            for i in range(start, min(n, start + per_tx)):
                tx.send(handles[i % CONVERSATIONS], "DEFAULT", body(i, BODY))


def _query(spark: Any, url: str, tmp: Path, name: str, per_batch: int, sink: str) -> Any:
    df = (spark.readStream.format("sbroker").option("url", url).option("queue", "In")
          .option("maxMessagesPerBatch", per_batch).load()
          .selectExpr("conversation_handle AS conversation_key", "message_body"))
    writer = df.writeStream.format(sink).option("checkpointLocation", str(tmp / f"{name}.ck"))
    if sink == "sbroker":
        writer = (writer.option("url", url).option("from_service", "Src")
                  .option("to_service", "Out"))
    return writer.trigger(processingTime="0 seconds").start()


def _instant(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


_runs = itertools.count()


def throughput(spark: Any, tmp: Path, per_batch: int, sink: str, n: int) -> dict[str, Any]:
    """One run: msgs/s over the micro-batches, start-up seconds, median phase ms."""
    name = f"t{per_batch}{sink}{next(_runs)}"
    b, url = fresh(tmp, name)
    try:
        fill(b, n)
        started = time.perf_counter()
        query = _query(spark, url, tmp, name, per_batch, sink)
        try:
            query.processAllAvailable()
            wall = time.perf_counter() - started
            batches = [p for p in query.recentProgress if p["numInputRows"]]
        finally:
            query.stop()
        rows = sum(p["numInputRows"] for p in batches)
        if rows != n:
            raise RuntimeError(f"the query read {rows} rows, not {n}")
        if sink == "sbroker" and len(b.peek("Out")) != n:
            raise RuntimeError("the sink did not send every message")
        # Steady state: from the second micro-batch on (each receives the one before it in
        # its latestOffset; the first has nothing to receive and starts Spark's workers).
        steady = batches[1:]
        first = _instant(steady[0]["timestamp"])
        last = _instant(steady[-1]["timestamp"]) + steady[-1]["batchDuration"] / 1000
        return {"msgs/s": sum(p["numInputRows"] for p in steady) / (last - first),
                "startup": wall - (last - first), "batches": len(batches),
                "phases": {k: statistics.median(p["durationMs"].get(k, 0) for p in steady)
                           for k in PHASES}}
    finally:
        b.close()


def latency(spark: Any, tmp: Path, count: int, gap: float) -> list[float]:
    """Seconds from each message's send commit to the sink's commit of it."""
    b, url = fresh(tmp, "latency")
    try:
        fill(b, 10)  # the query's first batch: wait for it before timing anything
        query = _query(spark, url, tmp, "latency", 10_000, "sbroker")
        try:
            query.processAllAvailable()
            with b.transaction() as tx:
                handle = tx.begin_dialog("Src", "In")
            pause = threading.Event()
            for _ in range(count):
                with b.transaction() as tx:
                    tx.send(handle, "DEFAULT", f"{time.time():.6f}")
                pause.wait(gap)
            deadline = time.monotonic() + 120
            while len(b.peek("Out")) < 10 + count and time.monotonic() < deadline:
                pause.wait(0.05)  # the sink commits in Spark's driver, another process
        finally:
            query.stop()
        return [m.message_enqueue_time - float(m.message_body) for m in b.peek("Out")[10:]]
    finally:
        b.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.stream", description=__doc__)
    parser.add_argument("--only", choices=("throughput", "latency"), action="append")
    parser.add_argument("--batches", type=int, nargs="+", default=sorted(MESSAGES),
                        help="maxMessagesPerBatch values (default 1000 10000 100000)")
    parser.add_argument("--sinks", nargs="+", default=["noop", "sbroker"])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--latency-count", type=int, default=40)
    args = parser.parse_args()
    parts = set(args.only or ("throughput", "latency"))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = create_session(SparkConfig(master="local[2]", app_name="bench-stream"))
    register(spark)
    table = Table(title="sbroker queues through Spark Structured Streaming, local[2], "
                        "durability normal")
    for col in ("run", "figure", "startup s", "batches", *(f"{p} ms" for p in PHASES)):
        table.add_column(col)
    try:
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = Path(tmp_name)
            throughput(spark, tmp, 1_000, "noop", 2_000)  # warm the JVM and the workers
            if "throughput" in parts:
                for per_batch in args.batches:
                    n = MESSAGES.get(per_batch, 3 * per_batch)
                    for sink in args.sinks:
                        for run in range(args.runs):
                            console.print(f"{n:,} messages, {per_batch:,} per batch -> {sink}")
                            got = throughput(spark, tmp, per_batch, sink, n)
                            table.add_row(
                                f"{per_batch:,}/batch -> {sink} #{run + 1}",
                                f"{got['msgs/s']:,.0f} msgs/s", f"{got['startup']:.1f}",
                                str(got["batches"]),
                                *(f"{got['phases'][p]:,.0f}" for p in PHASES))
            if "latency" in parts:
                console.print(f"latency: {args.latency_count} messages, one every 0.25 s")
                seen = sorted(latency(spark, tmp, args.latency_count, 0.25))
                table.add_row("send -> sink commit, trigger 0 s",
                              f"p50 {statistics.median(seen) * 1000:,.0f} ms, "
                              f"max {seen[-1] * 1000:,.0f} ms (n={len(seen)})", "", "",
                              *("" for _ in PHASES))
    finally:
        spark.stop()
    console.print(table)


if __name__ == "__main__":
    main()
