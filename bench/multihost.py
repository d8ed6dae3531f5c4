"""W5: many processes receiving one queue of one PostgreSQL broker database, as hosts would.

``python -m bench.multihost [--runs 3] [--messages 20000] [--processes 4] [--threads 4]``

Each run fills a fresh database with ``--messages`` messages over 100 conversations (sent 100
per transaction), then starts the readers: ``--processes`` processes (each its own broker and
pool, as on separate hosts) of ``--threads`` threads, each thread receiving one message per
transaction until the queue is empty.  The figure is messages received per second from the
moment all readers are released until the last one finds the queue empty.  The same run
measures one process with one thread (W1 receive: the baseline of the target W5 >= 2x) on
its own database.  Every message must be received exactly once (checked).  Durability
"normal" (synchronous_commit=off), the server with fsync=on.  Beside each figure: how many of
the machine's CPUs were busy meanwhile (readers and server share them), hence the most that
adding readers can give here, and the CPU time per message of each.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
import statistics
import threading
import time
from typing import Any

from bench.servers import ServerPool

CONVERSATIONS = 100
BODY = 200


def fill(url: str, messages: int) -> None:
    """Queue ``messages`` messages over CONVERSATIONS conversations."""
    from sbroker import Broker

    with Broker.open(url) as b:
        b.create_queue("qi")
        b.create_queue("q")
        b.create_service("svc_i", "qi")
        b.create_service("svc_t", "q", contracts=["DEFAULT"])
        with b.transaction() as tx:
            handles = [tx.begin_dialog("svc_i", "svc_t") for _ in range(CONVERSATIONS)]
        for start in range(0, messages, 100):
            with b.transaction() as tx:
                for i in range(start, min(start + 100, messages)):
                    tx.send(handles[i % CONVERSATIONS], "DEFAULT",
                            f"{i:010d}".encode().ljust(BODY, b"."))


def reader(url: str, threads: int, gate: Any, out: Any) -> None:
    """One process: ``threads`` threads receiving one message per transaction until the
    queue is empty; puts (received numbers, the time the last thread finished)."""
    from sbroker import Broker

    b = Broker.open(url + f"?pool_max={threads + 4}")
    got: list[int] = []
    lock = threading.Lock()

    def run() -> None:
        mine = []
        while True:
            with b.transaction() as tx:
                msgs = tx.receive("q", top=1)
            if not msgs:
                if not b.peek("q", top=1):
                    break
                continue  # the rest is in groups other readers hold
            mine.append(int(msgs[0].message_body[:10]))
        with lock:
            got.extend(mine)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    gate.wait()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    out.put((got, time.time()))
    b.close()


def _cpu_ticks() -> tuple[int, int]:
    """(busy, all) clock ticks of every CPU of the machine so far (/proc/stat)."""
    with open("/proc/stat") as stat:
        ticks = [int(v) for v in stat.readline().split()[1:]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)  # idle and iowait are not busy


def measure(url: str, messages: int, processes: int, threads: int) -> tuple[float, float]:
    """Messages per second received by ``processes`` x ``threads`` readers, and how many of
    the machine's CPUs were busy meanwhile (the readers and the server, on one machine)."""
    fill(url, messages)
    ctx = mp.get_context("spawn")
    gate = ctx.Barrier(processes + 1)
    out = ctx.Queue()
    procs = [ctx.Process(target=reader, args=(url, threads, gate, out))
             for _ in range(processes)]
    for p in procs:
        p.start()
    gate.wait()
    start = time.time()
    ticks = _cpu_ticks()
    results = []
    while len(results) < len(procs):
        try:
            results.append(out.get(timeout=1))
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in procs):
                raise RuntimeError("a reader process failed (its traceback is above)") from None
    busy, every = (b - a for a, b in zip(ticks, _cpu_ticks(), strict=True))
    for p in procs:
        p.join(60)
    received = sorted(n for got, _ in results for n in got)
    if received != list(range(messages)):
        raise RuntimeError(f"received {len(received)} of {messages}, {len(set(received))}"
                           " distinct")
    return messages / (max(end for _, end in results) - start), busy / every * _cpus()


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.multihost", description=__doc__)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--messages", type=int, default=20_000)
    p.add_argument("--baseline-messages", type=int, default=5_000)
    p.add_argument("--processes", type=int, default=4)
    p.add_argument("--threads", type=int, default=4)
    args = p.parse_args(argv)
    pool = ServerPool()
    try:
        server: Any = pool.get("postgres")
        w1, w5, busy1, busy5 = [], [], [], []
        for run in range(1, args.runs + 1):
            one, cpus1 = measure(server.create_database(f"w1_{run}"), args.baseline_messages,
                                 1, 1)
            many, cpus5 = measure(server.create_database(f"w5_{run}"), args.messages,
                                  args.processes, args.threads)
            w1.append(one)
            w5.append(many)
            busy1.append(cpus1)
            busy5.append(cpus5)
            print(f"run {run}: W1 receive (1 process x 1 thread) {one:,.0f} msgs/s, {cpus1:.2f}"
                  f" CPUs busy; W5 ({args.processes} x {args.threads}) {many:,.0f} msgs/s,"
                  f" {cpus5:.2f} CPUs busy = {many / one:.2f}x", flush=True)
        m1, m5 = statistics.median(w1), statistics.median(w5)
        b1, b5 = statistics.median(busy1), statistics.median(busy5)
        print(f"median of {args.runs}: W1 receive {m1:,.0f} msgs/s (min {min(w1):,.0f},"
              f" max {max(w1):,.0f}); W5 {m5:,.0f} msgs/s (min {min(w5):,.0f},"
              f" max {max(w5):,.0f}); W5 / W1 = {m5 / m1:.2f}x -> target W5 >= 2x W1:"
              f" {'met' if m5 >= 2 * m1 else 'missed'}")
        print(f"CPUs busy (readers and server, median): W1 {b1:.2f}, W5 {b5:.2f} of {_cpus()};"
              f" at W1's CPU per message this machine cannot pass {_cpus() / b1:.2f}x W1;"
              f" W5's CPU per message is {b5 / m5 * 1e6:,.0f} µs against W1's"
              f" {b1 / m1 * 1e6:,.0f}")
    finally:
        pool.close()


if __name__ == "__main__":
    main()
