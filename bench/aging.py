"""`python -m bench.aging`: whether a broker stays as fast after a long life.

One SQLite database first lives through ``--aged`` conversations (default 1,000,000), each
begun, used (one message each way) and ended by both sides; then W1 runs on it ``--runs``
times, each run paired with a W1 on a fresh database just before it. Nothing of an ended
conversation may stay behind: then an aged database is as fast as a fresh one. Writes
bench/results/aging-latest.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from bench.measure import progress
from bench.report import store
from bench.runner import fresh
from bench.servers import ServerPool
from bench.systems.sbroker import Sbroker
from bench.workloads import Sizes, w1

BATCH = 100
"""Conversations begun together (one initiator-side group) and ended together."""
TARGET_TX = 10
"""Conversations the target answers and ends per transaction (small transactions age fastest:
each RECEIVE locks one more group of the transaction's)."""


def age(broker: Any, n: int, log: Callable[[str], None]) -> float:
    """Begin, use (one message each way) and end ``n`` conversations; conversations/s."""
    t0 = last = time.perf_counter()
    done = 0
    while done < n:
        k = min(BATCH, n - done)
        with broker.transaction() as tx:
            first = tx.begin_dialog("svc_i", "svc_t")
            handles = [first] + [tx.begin_dialog("svc_i", "svc_t", related_conversation=first)
                                 for _ in range(k - 1)]
            tx.send(handles, "DEFAULT", b"ping")
        for j in range(0, k, TARGET_TX):
            with broker.transaction() as tx:
                for _ in range(min(TARGET_TX, k - j)):
                    (msg,) = tx.receive("q", top=1, timeout=5)
                    tx.send(msg.conversation_handle, "DEFAULT", b"pong")
                    tx.end_conversation(msg.conversation_handle)
        with broker.transaction() as tx:  # k answers and k EndDialogs come back
            msgs = tx.receive("qi", timeout=5)
            if len(msgs) != 2 * k:
                raise RuntimeError(f"aging: {len(msgs)} messages back for {k} conversations")
            for handle in handles:
                tx.end_conversation(handle)
        done += k
        if time.perf_counter() - last > 15:
            last = time.perf_counter()
            log(f"aged {done:,} of {n:,} conversations ({done / (last - t0):,.0f}/s)")
    return n / (time.perf_counter() - t0)


def measure(n: int, sizes: Sizes, runs: int, log: Callable[[str], None]
            ) -> list[dict[str, Any]]:
    """The stored rows: W1 aged and fresh (paired), their ratio, and the aging rate."""
    aged: list[dict[str, float]] = []
    new: list[dict[str, float]] = []
    with fresh(Sbroker(ServerPool())) as old:
        rate = age(old.broker, n, log)
        for run in range(runs):
            with fresh(Sbroker(ServerPool())) as system:
                new.append(w1(system, sizes))
            aged.append(w1(old, sizes))
            log(f"run {run + 1}/{runs}: aged {aged[-1]}, fresh {new[-1]}")
    rows: list[dict[str, Any]] = []
    for phase in ("send", "receive"):
        rows += [{"figure": f"W1 {phase} after {n:,} conversations", "unit": "msgs/s",
                  "values": [r[phase] for r in aged], "digits": 0},
                 {"figure": f"W1 {phase}, fresh, paired", "unit": "msgs/s",
                  "values": [r[phase] for r in new], "digits": 0},
                 {"figure": f"W1 {phase}, aged / fresh", "unit": "x", "target": ">= 0.90",
                  "values": [a[phase] / f[phase] for a, f in zip(aged, new, strict=True)]}]
    return [*rows, {"figure": "aging", "values": [rate], "unit": "conversations/s",
                    "digits": 0}]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.aging", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--aged", type=int, default=1_000_000, metavar="N",
                   help="conversations to live through before W1 (default 1,000,000)")
    p.add_argument("-n", type=int, default=10_000, help="W1's messages (default 10,000)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--no-json", action="store_true", help="do not write bench/results/")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.aged < 1 or args.n < 1 or args.runs < 1:
        p.error("--aged, -n and --runs must be at least 1")
    started, log = datetime.now(UTC), progress()

    rows = measure(args.aged, Sizes(w1=args.n, w2=0, w3=0, w4=0), args.runs, log)
    for row in rows:
        values = ", ".join(f"{v:,.2f}" for v in row["values"])
        print(f"{row['figure']}: {values} {row['unit']}")
    if not args.no_json:
        command = " ".join(["python -m bench.aging", *(argv or sys.argv[1:])])
        data = {"started": started.isoformat(), "command": command, "rows": rows}
        print(f"wrote {store('aging-latest.json', data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
