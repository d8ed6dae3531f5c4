"""`python -m bench.activation`: activation latency, a high-priority message under a backlog,
and a queue drained by 1, 2, 4, 8 activated readers (docs/activation.md).

    python -m bench.activation                 # the full figures (about a minute)
    python -m bench.activation --quick         # smaller counts
    python -m bench.activation --durability full --json out.json

Every figure uses a SQLite file in a temporary folder with the durability given (default
"normal", the WAL default).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.report import store
from bench.workloads import percentile
from sbroker import Activation, ActivationContext, Broker

WAIT = 120.0


def open_broker(folder: Path, name: str, durability: str, **options: Any) -> Broker:
    b = Broker.open(folder / f"{name}.db", durability=durability, **options)
    b.create_queue("InitQ")
    b.create_service("Init", "InitQ")
    return b


def activation_latency(folder: Path, durability: str, trials: int) -> dict[str, Any]:
    """Committed SEND on an idle queue -> the activated procedure's RECEIVE returns it."""
    received: dict[str, float] = {}
    arrived = threading.Event()

    def proc(ctx: ActivationContext) -> None:
        while True:
            with ctx.broker.transaction() as tx:
                msgs = tx.receive(ctx.queue)
                now = time.perf_counter()
                if not msgs:
                    return
                for m in msgs:
                    received[m.text()] = now
            arrived.set()

    b = open_broker(folder, "latency", durability)
    try:
        b.create_queue("TQ", activation=Activation(proc))
        b.create_service("Target", "TQ", ["DEFAULT"])
        svc = b._activation
        b.start()
        with b.transaction() as tx:
            handle = tx.begin_dialog("Init", "Target")
        latencies = []
        for i in range(trials):
            if not svc.wait_for(lambda: svc.running_tasks() == 0, WAIT):
                raise RuntimeError("the activated procedure did not return")
            arrived.clear()
            with b.transaction() as tx:
                tx.send(handle, body=str(i))
            sent = time.perf_counter()
            if not arrived.wait(WAIT):
                raise RuntimeError(f"trial {i}: no activation")
            latencies.append((received[str(i)] - sent) * 1000)
        started = b.view("dm_broker_queue_monitors")[0]["tasks_started"]
    finally:
        b.close()
    return {
        "trials": trials, "p50_ms": round(percentile(latencies, 50), 3),
        "p99_ms": round(percentile(latencies, 99), 3),
        "max_ms": round(max(latencies), 3), "mean_ms": round(statistics.mean(latencies), 3),
        "procedures_started": started, "target_p99_ms": 50,
    }


def priority_backlog(folder: Path, durability: str, backlog: int) -> dict[str, Any]:
    """``backlog`` priority-1 messages queued, then one priority-10: receives until it comes."""
    b = open_broker(folder, "priority", durability)
    try:
        b.create_queue("TQ")
        b.create_contract("Low", {"DEFAULT": "any"})
        b.create_contract("High", {"DEFAULT": "any"})
        b.create_service("Target", "TQ", ["Low", "High"])
        b.create_broker_priority("L", contract="Low", priority_level=1)
        b.create_broker_priority("H", contract="High", priority_level=10)
        conversations = max(1, backlog // 10)
        with b.transaction() as tx:
            handles = [tx.begin_dialog("Init", "Target", "Low") for _ in range(conversations)]
            for i in range(backlog):
                tx.send(handles[i % conversations], body=f"low{i}")
        with b.transaction() as tx:
            tx.send(tx.begin_dialog("Init", "Target", "High"), body="urgent")
        receives = 0
        began = time.perf_counter()
        first_ms = None
        while True:
            with b.transaction() as tx:
                msgs = tx.receive("TQ")
            receives += 1
            if first_ms is None:
                first_ms = (time.perf_counter() - began) * 1000
            if any(m.text() == "urgent" for m in msgs) or not msgs:
                break
    finally:
        b.close()
    return {"backlog": backlog, "receives_until_urgent": receives,
            "first_receive_ms": round(first_ms or 0.0, 3), "target": 1}


def drain(folder: Path, durability: str, readers: int, groups: int, per_group: int,
          work_ms: float) -> dict[str, Any]:
    """A backlog over ``groups`` conversation groups drained by up to ``readers`` readers."""
    total = groups * per_group
    lock = threading.Lock()
    done = threading.Event()
    count = [0]

    def proc(ctx: ActivationContext) -> None:
        while not ctx.stopping.is_set():
            with ctx.broker.transaction() as tx:
                msgs = tx.receive(ctx.queue)
                if not msgs:
                    return
                if work_ms:
                    time.sleep(work_ms / 1000)
            with lock:
                count[0] += len(msgs)
                if count[0] >= total:
                    done.set()

    b = open_broker(folder, f"drain{readers}-{work_ms}", durability, monitor_interval=0.05)
    try:
        b.create_queue("TQ", activation=Activation(proc, max_queue_readers=readers))
        b.create_service("Target", "TQ", ["DEFAULT"])
        with b.transaction() as tx:
            handles = [tx.begin_dialog("Init", "Target") for _ in range(groups)]
            for i in range(total):
                tx.send(handles[i % groups], body=f"m{i}")
        began = time.perf_counter()
        b.start()
        if not done.wait(WAIT):
            raise RuntimeError("the readers did not drain the queue")
        elapsed = time.perf_counter() - began
        started = b.view("dm_broker_queue_monitors")[0]["tasks_started"]
    finally:
        b.close()
    return {"readers": readers, "work_ms_per_group": work_ms, "messages": total,
            "groups": groups, "seconds": round(elapsed, 3),
            "messages_per_s": round(total / elapsed), "groups_per_s": round(groups / elapsed),
            "procedures_started": started}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m bench.activation", description=__doc__)
    p.add_argument("--quick", action="store_true", help="smaller counts")
    p.add_argument("--durability", choices=["normal", "full"], default="normal")
    p.add_argument("--json", type=Path, help="also write the figures to this file")
    p.add_argument("--no-json", action="store_true",
                   help="do not write bench/results/activation-latest.json")
    args = p.parse_args(argv)
    trials, backlog, per_group = (200, 2_000, 2) if args.quick else (1_000, 10_000, 10)
    out: dict[str, Any] = {"started": datetime.now(UTC).isoformat(),
                           "command": "python -m bench.activation " + " ".join(argv or []),
                           "durability": args.durability, "python": platform.python_version(),
                           "cpus": os.cpu_count(), "platform": platform.platform()}
    with tempfile.TemporaryDirectory(prefix="sbroker-bench-") as tmp:
        folder = Path(tmp)
        out["activation_latency"] = lat = activation_latency(folder, args.durability, trials)
        print(f"activation latency over {trials} trials: p50 {lat['p50_ms']} ms, "
              f"p99 {lat['p99_ms']} ms (target <= 50), max {lat['max_ms']} ms")
        out["priority_backlog"] = pri = priority_backlog(folder, args.durability, backlog)
        print(f"priority 10 behind {backlog} priority-1 messages: out after "
              f"{pri['receives_until_urgent']} receive(s) ({pri['first_receive_ms']} ms)")
        out["drain"] = []
        for work_ms in (0.0, 2.0):
            for readers in (1, 2, 4, 8):
                row = drain(folder, args.durability, readers, 1_000, per_group, work_ms)
                out["drain"].append(row)
                print(f"drain {row['messages']} msgs / 1000 groups, {readers} reader(s), "
                      f"{work_ms} ms work per group: {row['messages_per_s']} msg/s "
                      f"({row['groups_per_s']} groups/s, {row['seconds']} s)")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    if not args.no_json and not args.quick:
        store("activation-latest.json", out)
    return out


if __name__ == "__main__":
    main()
