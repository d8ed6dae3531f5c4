"""`python -m bench.network`: two sbroker instances on loopback, each served by its own
process (``run_serve``), 10,000 messages of 1 KB on 100 dialogs, durable; messages per second
clean and through a fault-injecting proxy (5 % loss, duplication and reordering of frames).

The figure is end to end: from the first SEND commit on instance A to the commit of the RECEIVE
that took the last message on instance B (the application side runs in this process).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import sbroker
from sbroker.serve import run_serve
from tests.network.proxy import FaultProxy, Faults

SECRET = "bench secret"


def _serve(db: str) -> None:
    def ready(broker: sbroker.Broker) -> None:
        address = broker.network.address
        print(f"PORT {address[1] if address else 0}", flush=True)

    sys.exit(run_serve(db, durability="full", ready=ready))


class _Child:
    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.network", "--serve", str(db)],
            stdout=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"serving process did not start: {line!r}")
        self.port = int(line.split()[1])

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def _setup(db: Path, service: str, contracts: list[str], endpoint: dict[str, Any]) -> None:
    with sbroker.Broker.open(db) as b:
        b.create_queue("q")
        b.create_service(service, "q", contracts)
        b.create_endpoint(port=0, secret=SECRET, **endpoint)


def run(messages: int, dialogs: int, size: int, faults: Faults | None,
        endpoint: dict[str, Any]) -> dict[str, Any]:
    """One run; returns the figures."""
    with tempfile.TemporaryDirectory(prefix="sbroker-bench-net-") as tmp:
        db_a, db_b = Path(tmp, "a.db"), Path(tmp, "b.db")
        _setup(db_a, "SvcA", [], endpoint)
        _setup(db_b, "SvcB", ["DEFAULT"], endpoint)
        child_b = _Child(db_b)
        proxy = None
        port = child_b.port
        if faults is not None:
            proxy = FaultProxy(child_b.port, faults, seed=42)
            port = proxy.start()
        with sbroker.Broker.open(db_a) as b:
            b.create_route("to-b", "SvcB", f"tcp://127.0.0.1:{port}")
        child_a = _Child(db_a)
        with sbroker.Broker.open(db_b) as b:
            b.create_route("to-a", "SvcA", f"tcp://127.0.0.1:{child_a.port}")
        sender = sbroker.Broker.open(db_a, durability="full")
        receiver = sbroker.Broker.open(db_b, durability="full")
        body = b"x" * size
        per_dialog = messages // dialogs
        received = [0]
        done = threading.Event()

        def drain() -> None:
            deadline = time.monotonic() + 600
            while received[0] < per_dialog * dialogs and time.monotonic() < deadline:
                with receiver.transaction() as tx:
                    received[0] += len(tx.receive("q", timeout=0.5))
            done.set()

        try:
            with sender.transaction() as tx:
                handles = [tx.begin_dialog("SvcA", "SvcB") for _ in range(dialogs)]
            reader = threading.Thread(target=drain)
            t0 = time.perf_counter()
            reader.start()
            for _ in range(per_dialog):
                with sender.transaction() as tx:
                    tx.send(handles, body=body)
            done.wait(650)
            elapsed = time.perf_counter() - t0
            reader.join(30)
        finally:
            sender.close()
            receiver.close()
            child_a.stop()
            child_b.stop()
            if proxy is not None:
                proxy.stop()
        n = received[0]
        result: dict[str, Any] = {"messages": n, "seconds": round(elapsed, 3),
                                  "msg_per_s": round(n / elapsed)}
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
    args = ap.parse_args()
    if args.serve:
        _serve(args.serve)
        return
    endpoint = {"encryption": args.encryption, "retry_initial": args.retry_initial}
    print(f"durability: full (fsync per commit) on both instances and both application sides;"
          f" endpoint {endpoint}")
    clean = run(args.messages, args.dialogs, args.size, None, endpoint)
    print(f"clean      : {clean}  (target >= 5,000 msg/s)")
    faults = Faults(mode="frame", p_drop=args.loss, p_dup=args.loss, p_reorder=args.loss)
    lossy = run(args.messages, args.dialogs, args.size, faults, endpoint)
    print(f"proxy {args.loss:.0%}  : {lossy}")


if __name__ == "__main__":
    main()
