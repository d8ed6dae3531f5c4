"""The suite's four workloads; each run gets a freshly set-up system and returns its figures."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from bench.systems import Client, System

RECEIVE_TIMEOUT = 5.0
"""How long a receive waits before the workload declares messages lost (W1-W3)."""
W4_GAP = 0.005
"""Pause after each W4 message is received, so that the receiver is waiting again."""


@dataclass(frozen=True)
class Sizes:
    """Message counts per workload; the same for every system in one suite run."""

    w1: int
    w2: int
    w3: int
    w4: int
    body: int = 200
    batch: int = 100
    threads: int = 8


FULL = Sizes(w1=10_000, w2=20_000, w3=3_000, w4=300)
QUICK = Sizes(w1=1_000, w2=5_000, w3=1_000, w4=100)
"""W2 stays at 20,000: RabbitMQ and the peers whose receive slows as acked rows pile up would
take the full suite past 15 minutes on 2 cores at 100,000; --quick stays under 2."""


@dataclass(frozen=True)
class Metric:
    """One figure a workload reports."""

    key: str
    unit: str
    higher_is_better: bool = True


def body(i: int, size: int) -> bytes:
    """Message `i`'s body: its number, then padding to `size` bytes."""
    return f"{i:010d}".encode().ljust(size, b".")


class Tally:
    """Counts received bodies and fails on a duplicate, a bad size or a loss."""

    def __init__(self, n: int, size: int) -> None:
        self.n, self.size = n, size
        self.seen = bytearray(n)
        self.count = 0
        self.last = time.perf_counter()
        self.lock = threading.Lock()

    def stalled(self, since: float) -> bool:
        """Whether messages are missing and none came for RECEIVE_TIMEOUT after `since`."""
        idle = time.perf_counter() - max(self.last, since)
        return self.count < self.n and idle > RECEIVE_TIMEOUT

    def add(self, got: bytes | None) -> int:
        """Record one received body (None means the receive timed out); return its number."""
        if got is None:
            raise RuntimeError(f"lost messages: {self.count} of {self.n} received, "
                               f"then nothing for {RECEIVE_TIMEOUT:g} s")
        if len(got) != self.size:
            raise RuntimeError(f"body of {len(got)} bytes, expected {self.size}")
        i = int(got[:10])
        with self.lock:
            if self.seen[i]:
                raise RuntimeError(f"message {i} delivered twice")
            self.seen[i] = 1
            self.count += 1
            self.last = time.perf_counter()
        return i


def rate(n: int, t0: float) -> float:
    """Messages per second for `n` messages since perf_counter() was `t0`."""
    return n / (time.perf_counter() - t0)


Around = Callable[[str], AbstractContextManager[object]]
"""Entered around each timed phase ("send", "receive") of W1 and W2, outside its timing: a
tool that looks inside a phase (bench.where) starts and ends its own count there."""


def w1(system: System, sizes: Sizes, around: Around = contextlib.nullcontext) -> dict[str, float]:
    """Send n messages one per transaction, then receive them one per transaction."""
    n, c = sizes.w1, system.client()
    try:
        bodies = [body(i, sizes.body) for i in range(n)]
        with around("send"):
            t0 = time.perf_counter()
            for b in bodies:
                c.send_one(b)
            send = rate(n, t0)
        tally = Tally(n, sizes.body)
        with around("receive"):
            t0 = time.perf_counter()
            for _ in range(n):
                tally.add(c.receive_one(RECEIVE_TIMEOUT))
            return {"send": send, "receive": rate(n, t0)}
    finally:
        c.close()


def receive_all(c: Client, tally: Tally, k: int) -> None:
    """Receive `k` per transaction until the tally holds every message (W2's receive phase)."""
    while tally.count < tally.n:
        got = c.receive_batch(k, RECEIVE_TIMEOUT)
        if not got:
            tally.add(None)
        for b in got:
            tally.add(b)


def w2(system: System, sizes: Sizes, around: Around = contextlib.nullcontext) -> dict[str, float]:
    """Send n messages 100 per transaction, then receive them 100 per transaction."""
    n, k, c = sizes.w2, sizes.batch, system.client()
    figures: dict[str, float] = {}
    try:
        bodies = [body(i, sizes.body) for i in range(n)]
        with around("send"):
            t0 = time.perf_counter()
            if system.no_batch_send:
                for b in bodies:  # only to fill the queue for the receive phase
                    c.send_one(b)
            else:
                for j in range(0, n, k):
                    c.send_batch(bodies[j:j + k])
                figures["send"] = rate(n, t0)
        if system.no_batch_receive:
            return figures
        tally = Tally(n, sizes.body)
        with around("receive"):
            t0 = time.perf_counter()
            receive_all(c, tally, k)
            figures["receive"] = rate(n, t0)
        return figures
    finally:
        c.close()


def run_threads(targets: list[Callable[[], None]], timeout: float) -> float:
    """Run each target in a thread, all released at once; re-raise the first error.

    Returns the perf_counter() time at which the threads were released.
    """
    errors: list[BaseException] = []
    released: list[float] = []
    gate = threading.Barrier(len(targets), action=lambda: released.append(time.perf_counter()))

    def guarded(target: Callable[[], None]) -> None:
        try:
            gate.wait()
            target()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(t,), daemon=True) for t in targets]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    if errors:
        raise errors[0]
    if any(t.is_alive() for t in threads):
        raise TimeoutError(f"threads still running after {timeout:g} s")
    return released[0]


def w3(system: System, sizes: Sizes) -> dict[str, float]:
    """8 producers and 8 consumers at once, one message per transaction each."""
    n, p = sizes.w3, sizes.threads
    tally = Tally(n, sizes.body)
    done = {"sent": 0.0, "received": 0.0}
    sent = [0]
    lock = threading.Lock()
    clients = [system.client(slot=i, slots=p) for i in range(p)]
    clients += [system.client() for _ in range(p)]

    def producer(c: Client, slot: int) -> Callable[[], None]:
        def run() -> None:
            for i in range(slot, n, p):
                c.send_one(body(i, sizes.body))
            with lock:
                sent[0] += 1
                if sent[0] == p:
                    done["sent"] = time.perf_counter()
        return run

    def consumer(c: Client) -> None:
        while tally.count < n:
            got = c.receive_one(0.2)
            if got is not None:
                tally.add(got)
            elif done["sent"] and tally.stalled(since=done["sent"]):
                tally.add(None)
        done["received"] = done["received"] or time.perf_counter()

    try:
        targets = [producer(c, i) for i, c in enumerate(clients[:p])]
        targets += [lambda c=c: consumer(c) for c in clients[p:]]  # type: ignore[misc]
        t0 = run_threads(targets, timeout=600)
        return {"send": n / (done["sent"] - t0), "receive": n / (done["received"] - t0)}
    finally:
        for c in clients:
            c.close()


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank q-th percentile (q in 0..100)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def w4(system: System, sizes: Sizes) -> dict[str, float]:
    """Latency from the start of a one-message send transaction to a waiting receiver's return."""
    n, warmup = sizes.w4, 5
    sender, receiver = system.client(), system.client()
    started: dict[int, float] = {}
    latency: dict[int, float] = {}
    arrived = threading.Event()
    tally = Tally(n + warmup, sizes.body)

    def receive() -> None:
        for _ in range(n + warmup):
            got = receiver.receive_one(RECEIVE_TIMEOUT)
            now = time.perf_counter()
            i = tally.add(got)
            latency[i] = now - started[i]
            arrived.set()

    def send() -> None:
        time.sleep(0.05)  # let the receiver start waiting
        for i in range(n + warmup):
            arrived.clear()
            started[i] = time.perf_counter()
            sender.send_one(body(i, sizes.body))
            if not arrived.wait(RECEIVE_TIMEOUT + 1):
                raise RuntimeError(f"message {i} not received within {RECEIVE_TIMEOUT:g} s")
            time.sleep(W4_GAP)

    try:
        run_threads([receive, send], timeout=n * 0.5 + 60)
        ms = [latency[i] * 1000 for i in range(warmup, n + warmup)]
        return {"p50": percentile(ms, 50), "p99": percentile(ms, 99)}
    finally:
        sender.close()
        receiver.close()


@dataclass(frozen=True)
class Workload:
    """A named workload, its figures, and the function that runs it once."""

    name: str
    title: str
    metrics: tuple[Metric, ...]
    run: Callable[[System, Sizes], dict[str, float]]
    count: Callable[[Sizes], int]

    def describe(self, sizes: Sizes) -> str:
        """The workload's size in words, the same for every system."""
        return f"{self.name}: {self.title}; {self.count(sizes):,} msgs of {sizes.body} B"

    def not_applicable(self, system: type[System]) -> dict[str, str]:
        """Figures this system has no equivalent for, with the reason."""
        if self.name == "W2":
            reasons = {"send": system.no_batch_send, "receive": system.no_batch_receive}
            return {k: v for k, v in reasons.items() if v}
        if self.name == "W3" and system.no_concurrency:
            return {m.key: system.no_concurrency for m in self.metrics}
        return {}


THROUGHPUT = (Metric("send", "msgs/s"), Metric("receive", "msgs/s"))
LATENCY = (Metric("p50", "ms", higher_is_better=False), Metric("p99", "ms", higher_is_better=False))

WORKLOADS = [
    Workload("W1", "one message per transaction, send all then receive all",
             THROUGHPUT, w1, lambda s: s.w1),
    Workload("W2", "100 messages per transaction both ways (receive top 100)",
             THROUGHPUT, w2, lambda s: s.w2),
    Workload("W3", "8 producers + 8 consumers at once, one message per transaction",
             THROUGHPUT, w3, lambda s: s.w3),
    Workload("W4", "latency, send commit -> waiting receiver",
             LATENCY, w4, lambda s: s.w4),
]
