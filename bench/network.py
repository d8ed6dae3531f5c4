"""`python -m bench.network`: two sbroker instances on loopback, each served by its own
process (``run_serve``), 10,000 messages of 1 KB on 100 dialogs, durable; messages per second
clean and through a fault-injecting proxy (5 % loss, duplication and reordering of frames).

Two figures per setting: "transfer" (the network layer: with the messages waiting in A's
transmission queue, from the moment a route to B is created until all are durably in B's queue
and acknowledged back), and "end to end" (from the first SEND commit on A to the commit of the
RECEIVE that took the last message on B; the applications run in this process).
Run it from the repository root (it uses the fault-injecting proxy of
``tests/integration/network``).
Options: ``--retry-initial`` (seed default 2 s), ``--loss``, ``--messages``, ``--dialogs``,
``--settings clean|proxy|both``, ``--runs N``, ``--backend sqlite|postgres`` (postgres: both
instances' databases on one throwaway server, started for the run). Each result also gives the
CPU seconds each serving process used while it was timed (``cpu_a``, ``cpu_b``), a steadier
figure than the wall clock on a busy machine (on PostgreSQL the server's CPU is not in them).
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import sbroker
from bench.measure import cpu_of
from bench.servers import databases
from sbroker.cli.serve import run_serve
from tests.integration.network.proxy import FaultProxy, Faults

SECRET = "bench secret"


def _serve(db: str) -> None:
    def ready(broker: sbroker.Broker) -> None:
        address = broker.network.address
        print(f"PORT {address[1] if address else 0}", flush=True)

    sys.exit(run_serve(db, durability="full", ready=ready))


class _Child:
    """A process serving ``db`` (durability full), stopped on leaving ``with``."""

    def __init__(self, db: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.network", "--serve", str(db)],
            stdout=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"serving process did not start: {line!r}")
        self.port = int(line.split()[1])

    def __enter__(self) -> _Child:
        return self

    def cpu(self) -> float:
        return cpu_of(self.proc.pid)

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _setup(db: str, service: str, contracts: list[str], endpoint: dict[str, Any]) -> None:
    with sbroker.Broker.open(db) as b:
        b.create_queue("q")
        b.create_service(service, "q", contracts)
        b.create_endpoint(port=0, secret=SECRET, **endpoint)


Count = Callable[[str], int]
"""``count(table)``: how many rows the table has in one of the two databases."""


@contextmanager
def _counter(db: str) -> Iterator[Count]:
    """One connection for a whole wait: opening one per look costs the serving processes ~1 ms
    of the two cores' CPU at every poll."""
    if db.startswith("postgresql://"):
        import psycopg

        conn: Any = psycopg.connect(db, autocommit=True)
    else:
        conn = sqlite3.connect(db)
    try:
        yield lambda table: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


def _wait_transferred(db_a: str, db_b: str, total: int, deadline: float) -> int:
    """Poll until ``total`` messages are in B's queue and A's transmission queue is empty;
    returns the count in B's queue."""
    with _counter(db_a) as a, _counter(db_b) as b:
        n = 0
        while time.monotonic() < deadline:
            n = b("sb_messages")
            if n >= total and not a("sb_transmission_queue"):
                break
            time.sleep(0.01)
        return n


def run(messages: int, dialogs: int, size: int, faults: Faults | None,
        endpoint: dict[str, Any], *, end_to_end: bool,
        new: Callable[[str], str] | None = None) -> dict[str, Any]:
    """One run. ``end_to_end``: the application sends on A while another receives on B, timed
    from the first SEND to the last RECEIVE commit. Otherwise (transfer): the messages wait in
    A's transmission queue for want of a route, the route is created, and the time runs until all
    of them are durably enqueued on B and acknowledged back to A (A's transmission queue empty).
    """
    if new is None:
        with databases("sqlite", "sbroker-bench-net-") as files:
            return run(messages, dialogs, size, faults, endpoint, end_to_end=end_to_end,
                       new=files)
    db_a, db_b = new("a"), new("b")
    _setup(db_a, "SvcA", [], endpoint)
    _setup(db_b, "SvcB", ["DEFAULT"], endpoint)
    body, per_dialog = b"x" * size, messages // dialogs
    total = per_dialog * dialogs
    with contextlib.ExitStack() as stack:
        child_b = stack.enter_context(_Child(db_b))
        proxy, port = None, child_b.port
        if faults is not None:
            proxy = FaultProxy(child_b.port, faults, seed=42)
            port = proxy.start()
            stack.callback(proxy.stop)
        if end_to_end:
            with sbroker.Broker.open(db_a) as b:
                b.create_route("to-b", "SvcB", f"tcp://127.0.0.1:{port}")
        sender = stack.enter_context(sbroker.Broker.open(db_a, durability="full"))
        receiver = stack.enter_context(sbroker.Broker.open(db_b, durability="full"))
        with sender.transaction() as tx:
            handles = [tx.begin_dialog("SvcA", "SvcB") for _ in range(dialogs)]

        def send_all() -> None:
            for _ in range(per_dialog):
                with sender.transaction() as tx:
                    tx.send(handles, body=body)

        child_a = stack.enter_context(_Child(db_a))
        received = [0]

        def drain() -> None:
            deadline = time.monotonic() + 600
            while received[0] < total and time.monotonic() < deadline:
                with receiver.transaction() as tx:
                    received[0] += len(tx.receive("q", timeout=0.5))

        reader = threading.Thread(target=drain)
        if not end_to_end:
            send_all()  # no route yet: the messages wait in A's transmission queue
        cpu0 = (child_a.cpu(), child_b.cpu())
        t0 = time.perf_counter()
        if end_to_end:
            reader.start()
            send_all()
            reader.join(650)
            n = received[0]
        else:
            sender.create_route("to-b", "SvcB", f"tcp://127.0.0.1:{port}")
            n = _wait_transferred(db_a, db_b, total, time.monotonic() + 600)
        elapsed = time.perf_counter() - t0
        cpu1 = (child_a.cpu(), child_b.cpu())
    result: dict[str, Any] = {"messages": n, "seconds": round(elapsed, 3),
                              "msg_per_s": round(n / elapsed),
                              "cpu_a": round(cpu1[0] - cpu0[0], 2),
                              "cpu_b": round(cpu1[1] - cpu0[1], 2)}
    if proxy is not None:
        c = proxy.counters
        result["proxy"] = {"frames": c.frames, "dropped": c.dropped,
                           "duplicated": c.duplicated, "reordered": c.reordered}
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--dialogs", type=int, default=100)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--loss", type=float, default=0.05,
                    help="proxy: probability of dropping, of duplicating and of reordering"
                         " each dialog frame")
    ap.add_argument("--retry-initial", type=float, default=2.0,
                    help="first retransmission after this many seconds (seed default 2-3 s)")
    ap.add_argument("--encryption", default="supported",
                    help="endpoint encryption; the frame-level proxy needs 'supported'")
    ap.add_argument("--settings", choices=("clean", "proxy", "both"), default="both",
                    help="run clean, through the proxy, or both")
    ap.add_argument("--runs", type=int, default=1, help="repeat each measurement")
    ap.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite",
                    help="where both instances keep their databases")
    args = ap.parse_args()
    if args.serve:
        _serve(args.serve)
        return
    endpoint = {"encryption": args.encryption, "retry_initial": args.retry_initial}
    print(f"{args.backend}; durability: full (fsync per commit) on both instances and both"
          f" application sides; endpoint {endpoint}; {args.messages} messages of {args.size} B"
          f" on {args.dialogs} dialogs")
    faults = Faults(mode="frame", p_drop=args.loss, p_dup=args.loss, p_reorder=args.loss)
    settings = [("clean", None), (f"proxy {args.loss:.0%}", faults)]
    if args.settings != "both":
        settings = settings[:1] if args.settings == "clean" else settings[1:]
    with databases(args.backend, "sbroker-bench-net-") as new:
        for label, f in settings:
            for _ in range(args.runs):
                transfer = run(args.messages, args.dialogs, args.size, f, endpoint,
                               end_to_end=False, new=new)
                print(f"{label:10} transfer   : {transfer}", flush=True)
            for _ in range(args.runs):
                e2e = run(args.messages, args.dialogs, args.size, f, endpoint,
                          end_to_end=True, new=new)
                print(f"{label:10} end to end : {e2e}", flush=True)
    print("target: >= 5,000 msg/s clean (transfer = the network layer: transmission queue on A"
          " to B's queue, acknowledged)")


if __name__ == "__main__":
    main()
