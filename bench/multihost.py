"""`python -m bench.multihost` (W5): many processes receiving one queue of one PostgreSQL broker
database, as hosts would (docs/postgresql.md).

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
adding readers can give here, the CPU time per message of each, and the machine's context
switches per message (each a process or thread that waited and another that ran: a reader
process that wakes for nothing shows here first).

The raw SKIP LOCKED peer (``bench/systems/postgres.py``: one row per message, a reader's
UPDATE ... RETURNING and DELETE) does the same in the same run, on a database of its own:
one process x one thread, then the W5 shape.  What it reaches says how far adding readers
can go on this machine for the simplest queue on PostgreSQL (``--no-peer`` leaves it out).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import queue
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from bench.servers import databases
from bench.systems.postgres import SCHEMA, PostgresClient
from bench.workloads import body

CONVERSATIONS = 100
BODY = 200
PEER_TABLE = "w5_peer"


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
                    tx.send(handles[i % CONVERSATIONS], "DEFAULT", body(i, BODY))


Reader = tuple[Callable[[], bytes | None], Callable[[], bool]]
"""One reader thread's ``take()`` (a message's body, or None) and ``left()`` (whether any is
still queued: the rest may be in groups or rows that other readers hold)."""


def _race(readers: list[Reader], gate: Any, out: Any) -> None:
    """Once every process is ready, one thread per reader receives until none is left; put
    (received numbers, the time the last thread finished)."""
    got: list[int] = []

    def run(take: Callable[[], bytes | None], left: Callable[[], bool]) -> None:
        mine = []
        while True:
            body = take()
            if body is not None:
                mine.append(int(body[:10]))
            elif not left():
                break
        got.extend(mine)

    workers = [threading.Thread(target=run, args=reader) for reader in readers]
    gate.wait()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    out.put((got, time.time()))


def reader(url: str, threads: int, gate: Any, out: Any) -> None:
    """One process: ``threads`` threads receiving one message per transaction until the
    queue is empty."""
    from sbroker import Broker

    b = Broker.open(url + f"?pool_max={threads + 4}")

    def take() -> bytes | None:
        with b.transaction() as tx:
            msgs = tx.receive("q", top=1)
        return bytes(msgs[0].message_body) if msgs else None

    _race([(take, lambda: bool(b.peek("q", top=1)))] * threads, gate, out)
    b.close()


def fill_peer(dsn: str, messages: int) -> None:
    """The raw peer's table with ``messages`` rows, inserted 100 per transaction."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SCHEMA.format(t=PEER_TABLE))
    client = PostgresClient(dsn, PEER_TABLE, "normal")
    try:
        for start in range(0, messages, 100):
            client.send_batch([body(i, BODY) for i in range(start, min(start + 100, messages))])
    finally:
        client.close()


def peer_reader(dsn: str, threads: int, gate: Any, out: Any) -> None:
    """:func:`reader` for the raw peer: a connection per thread, one row per receive."""
    left = f"SELECT EXISTS (SELECT 1 FROM {PEER_TABLE} WHERE status = 'queued')"

    def of(client: PostgresClient) -> Reader:
        return (lambda: client.receive_one(0)), (
            lambda: bool(client.conn.execute(left).fetchone()[0]))  # type: ignore[index]

    clients = [PostgresClient(dsn, PEER_TABLE, "normal") for _ in range(threads)]
    _race([of(c) for c in clients], gate, out)
    for c in clients:
        c.close()


def _machine() -> tuple[int, int, int]:
    """(busy, all) clock ticks of every CPU of the machine so far, and its context switches
    so far (/proc/stat)."""
    with open("/proc/stat") as stat:
        lines = stat.read().splitlines()
    ticks = [int(v) for v in lines[0].split()[1:]]
    switches = next(int(line.split()[1]) for line in lines if line.startswith("ctxt "))
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks), switches  # idle, iowait: not busy


class Drain(NamedTuple):
    """What one drain measured."""

    rate: float
    """messages received per second"""
    cpus: float
    """how many of the machine's CPUs were busy meanwhile (readers and server)"""
    switches: float
    """context switches of the whole machine per message: each is a process or thread
    that had to wait (for the server's answer, a lock, the GIL) and another that ran"""


def measure(url: str, messages: int, processes: int, threads: int, *, peer: bool = False
            ) -> Drain:
    """Messages per second received by ``processes`` x ``threads`` readers, how many of
    the machine's CPUs were busy meanwhile (the readers and the server, on one machine) and
    the machine's context switches per message.  ``peer``: the raw peer's readers, on the
    database of ``url``, instead of sbroker's."""
    (fill_peer if peer else fill)(url, messages)
    ctx = mp.get_context("spawn")
    gate = ctx.Barrier(processes + 1)
    out = ctx.Queue()
    procs = [ctx.Process(target=peer_reader if peer else reader,
                         args=(url, threads, gate, out))
             for _ in range(processes)]
    for p in procs:
        p.start()
    gate.wait()
    start = time.time()
    ticks = _machine()
    results = []
    while len(results) < len(procs):
        try:
            results.append(out.get(timeout=1))
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in procs):
                raise RuntimeError("a reader process failed (its traceback is above)") from None
    busy, every, switches = (b - a for a, b in zip(ticks, _machine(), strict=True))
    for p in procs:
        p.join(60)
    received = sorted(n for got, _ in results for n in got)
    if received != list(range(messages)):
        raise RuntimeError(f"received {len(received)} of {messages}, {len(set(received))}"
                           " distinct")
    return Drain(messages / (max(end for _, end in results) - start),
                 busy / every * _cpus(), switches / messages)


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
    p.add_argument("--no-peer", dest="peer", action="store_false",
                   help="leave out the raw SKIP LOCKED peer")
    args = p.parse_args(argv)
    systems = ["sbroker", "raw postgres"] if args.peer else ["sbroker"]
    shapes = [(1, 1, args.baseline_messages), (args.processes, args.threads, args.messages)]
    drains: dict[tuple[str, int], list[Drain]] = {}
    with databases("postgres") as new:
        for run in range(1, args.runs + 1):
            for system in systems:
                peer = system != "sbroker"
                for k, (processes, threads, messages) in enumerate(shapes):
                    url = new(f"w{5 if k else 1}_{run}{'_peer' if peer else ''}_")
                    drains.setdefault((system, k), []).append(
                        measure(url, messages, processes, threads, peer=peer))
                one, many = drains[system, 0][-1], drains[system, 1][-1]
                print(f"run {run} {system:>12}: W1 receive (1 x 1) {one.rate:,.0f} msgs/s,"
                      f" {one.cpus:.2f} CPUs busy, {one.switches:.1f} context switches per"
                      f" message; W5 ({args.processes} x {args.threads})"
                      f" {many.rate:,.0f} msgs/s, {many.cpus:.2f} CPUs busy,"
                      f" {many.switches:.1f} context switches per message ="
                      f" {many.rate / one.rate:.2f}x", flush=True)
        for system in systems:
            w1, w5 = ([d.rate for d in drains[system, k]] for k in (0, 1))
            (m1, b1, s1), (m5, b5, s5) = (
                [statistics.median(getattr(d, f) for d in drains[system, k])
                 for f in ("rate", "cpus", "switches")] for k in (0, 1))
            target = (f" -> target W5 >= 2x W1: {'met' if m5 >= 2 * m1 else 'missed'}"
                      if system == "sbroker" else "")
            print(f"{system}, median of {args.runs}: W1 receive {m1:,.0f} msgs/s (min"
                  f" {min(w1):,.0f}, max {max(w1):,.0f}); W5 {m5:,.0f} msgs/s (min"
                  f" {min(w5):,.0f}, max {max(w5):,.0f}); W5 / W1 = {m5 / m1:.2f}x{target}")
            print(f"  CPUs busy (readers and server, median): W1 {b1:.2f}, W5 {b5:.2f} of"
                  f" {_cpus()}; at W1's CPU per message this machine cannot pass"
                  f" {_cpus() / b1:.2f}x W1; W5's CPU per message is {b5 / m5 * 1e6:,.0f} µs"
                  f" against W1's {b1 / m1 * 1e6:,.0f}; context switches per message:"
                  f" W5 {s5:.1f}, W1 {s1:.1f}")


if __name__ == "__main__":
    main()
