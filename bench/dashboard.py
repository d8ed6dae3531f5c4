"""`python -m bench.dashboard`: the dashboard's page times on a large database (docs/dashboard.md).

Fills a database with 10,000 conversations holding 100,000 queued messages (10 each), a
locked group, 20,000 ExecutionLog rows in 100 pipeline runs of 4 stages and 200 parked
poison messages, serves its dashboard with uvicorn on loopback, and times every page over
HTTP: median, min and max of ``--runs`` loads, in ms.  ``--db`` keeps (and reuses) the filled file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx2

import sbroker
from sbroker.apps.dashboard import DashboardServer
from sbroker.apps.dashboard.demo import park_messages

PAGES = ("/", "/queues/Orders", "/queues/Orders?page=1000", "/conversations",
         "/conversations?state=CO&service_name=Warehouse&page=50", "/transmission",
         "/scheduler", "/scheduler?status=failed", "/poison", "/metrics",
         "/api/views/queue_stats")


def fill(broker: sbroker.Broker, conversations: int, per: int) -> None:
    """``conversations`` Shop -> Warehouse dialogs with ``per`` messages each, 100 a commit."""
    broker.create_queue("Orders")
    broker.create_queue("ShopReplies")
    broker.create_service("Shop", "ShopReplies")
    broker.create_service("Warehouse", "Orders", ["DEFAULT"])
    body = json.dumps({"order": 0, "lines": list(range(40))})
    per_commit = max(1, 100 // per)
    for start in range(0, conversations, per_commit):
        with broker.transaction() as tx:
            for _ in range(min(per_commit, conversations - start)):
                handle = tx.begin_dialog("Shop", "Warehouse")
                for _ in range(per):
                    tx.send(handle, body=body)
    broker.install_executor(runner=sbroker.apps.spark.StubRunner())  # type: ignore[attr-defined]
    base = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)
    with broker.transaction() as tx:
        for i in range(2 * conversations):  # 20,000 rows for 10,000 conversations
            run, k = divmod(i, 200)  # runs of 4 stages of 50 tasks
            at = base + dt.timedelta(seconds=run * 100 + k // 50 * 10)
            queued, started = at.isoformat(), (at + dt.timedelta(seconds=k % 50 / 10))
            ended = (started + dt.timedelta(seconds=0.5)).isoformat()
            status = "failed" if i % 97 == 0 else "succeeded"
            tx.execute(
                "INSERT INTO ExecutionLog(CallerID, SchedulerHandle, Task, QueuedTime,"
                " StartTime, EndTime, Status, Error, Pool) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                ("bench", f"run-{i // 200}", json.dumps({"type": "sql", "sql": f"SELECT {i}"}),
                 queued, started.isoformat(), ended, status, "boom" if status == "failed" else None,
                 f"pipeline-{i // 2000}"))
    park_messages(broker, 200, queue="Invoices")


def measure(url: str, runs: int) -> list[tuple[str, int, float, float, float, int]]:
    """(page, status, median ms, min ms, max ms, bytes) per page."""
    out = []
    with httpx2.Client(timeout=120) as client:
        for path in PAGES:
            times, status, size = [], 0, 0
            for _ in range(runs):
                started = time.perf_counter()
                r = client.get(url + path)
                times.append((time.perf_counter() - started) * 1000)
                status, size = r.status_code, len(r.content)
            out.append((path, status, statistics.median(times), min(times), max(times), size))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.dashboard", description=__doc__)
    p.add_argument("--conversations", type=int, default=10_000)
    p.add_argument("--per", type=int, default=10, help="messages per conversation")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--db", type=Path, help="keep the filled database here (reused if it exists)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.db or Path(tmp) / "dashboard.db"
        fresh = not path.exists()
        with sbroker.Broker.open(path) as broker:
            if fresh:
                started = time.perf_counter()
                fill(broker, args.conversations, args.per)
                print(f"filled {path} in {time.perf_counter() - started:.1f} s")
            [orders] = [q for q in broker.view("queue_stats") if q["queue_name"] == "Orders"]
            endpoints = len(broker.view("conversation_endpoints"))
            print(f"Orders: {orders['ready_messages']} ready messages; {endpoints} conversation "
                  f"endpoints; {len(broker.view('ExecutionLog'))} ExecutionLog rows")
            tx = broker.transaction()  # one group held, as a busy worker holds one
            tx.receive("Orders", top=1)
            try:
                with DashboardServer(broker, port=0) as server:
                    rows = measure(server.url, args.runs)
            finally:
                tx.rollback()
    print(f"\n{'page':<58} {'status':>6} {'median ms':>10} {'min':>8} {'max':>8} {'KiB':>7}")
    for path, status, median, low, high, size in rows:
        print(f"{path:<58} {status:>6} {median:>10.1f} {low:>8.1f} {high:>8.1f} "
              f"{size / 1024:>7.1f}")
    return 0 if all(r[1] == 200 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
