"""Two `sbroker serve`-like processes exchange 10,000 messages on 100 dialogs through
fault-injecting proxies (frames dropped, duplicated, reordered, bit-flipped; connections cut),
with one kill -9 and restart of each side during the run: every message arrives once and in
order."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

import sbroker

from .helpers import FAST, SECRET, wait_for
from .proxy import FaultProxy, Faults

CHILD = Path(__file__).with_name("serve_child.py")
DIALOGS, PER_DIALOG = 100, 100
DEADLINE = 150.0


class Child:
    """One serving process; ``start`` waits for its PORT line (bounded)."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> int:
        self.close_pipe()
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(self.db)], stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.proc.stdout is not None
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(60)
        assert line and line[0].startswith("PORT "), f"child did not start: {line}"
        return int(line[0].split()[1])

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def close_pipe(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def stop(self) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return 0
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(30)
        self.close_pipe()
        return code


def _setup(tmp_path: Path, name: str, service: str, contracts: list[str]) -> Path:
    db = tmp_path / f"{name}.db"
    with sbroker.Broker.open(db) as b:
        b.create_queue("q")
        b.create_service(service, "q", contracts)
        b.create_endpoint(port=0, secret=SECRET, encryption="supported", **FAST)
    return db


@pytest.fixture
def cleanup() -> Iterator[list[object]]:
    things: list[object] = []
    yield things
    for t in reversed(things):
        if isinstance(t, Child):
            if t.proc is not None and t.proc.poll() is None:
                t.kill9()
            t.close_pipe()
        elif isinstance(t, FaultProxy):
            t.stop()
        elif isinstance(t, sbroker.Broker):
            t.close()


@pytest.mark.slow
def test_two_serving_processes_through_a_faulty_proxy_with_kill9(
        tmp_path: Path, cleanup: list[object]) -> None:
    db_a = _setup(tmp_path, "a", "SvcA", [])
    db_b = _setup(tmp_path, "b", "SvcB", ["DEFAULT"])
    faults = Faults(mode="frame", p_drop=0.01, p_dup=0.01, p_reorder=0.01, p_corrupt=0.01,
                    p_cut=0.0005)
    proxy_a, proxy_b = FaultProxy(0, faults, seed=1), FaultProxy(0, faults, seed=2)
    cleanup += [proxy_a, proxy_b]
    port_pa, port_pb = proxy_a.start(), proxy_b.start()
    with sbroker.Broker.open(db_a) as a:
        a.create_route("to-b", "SvcB", f"tcp://127.0.0.1:{port_pb}")
    with sbroker.Broker.open(db_b) as b:
        b.create_route("to-a", "SvcA", f"tcp://127.0.0.1:{port_pa}")
    child_a, child_b = Child(db_a), Child(db_b)
    cleanup += [child_a, child_b]
    proxy_a.retarget(child_a.start())
    proxy_b.retarget(child_b.start())

    sender = sbroker.Broker.open(db_a)
    receiver = sbroker.Broker.open(db_b)
    cleanup += [sender, receiver]
    with sender.transaction() as tx:
        handles = [tx.begin_dialog("SvcA", "SvcB") for _ in range(DIALOGS)]

    def send(rounds: range) -> None:
        for r in rounds:
            with sender.transaction() as tx:
                for d, h in enumerate(handles):
                    tx.send(h, body=f"{d}:{r}")

    got: dict[str, list[str]] = defaultdict(list)
    count = [0]

    def drain(target: int) -> None:
        end = time.monotonic() + DEADLINE
        while count[0] < target:
            assert time.monotonic() < end, f"received {count[0]} of {target}"
            with receiver.transaction() as tx:
                for msg in tx.receive("q", timeout=0.5):
                    got[msg.conversation_handle].append(msg.text())
                    count[0] += 1

    total = DIALOGS * PER_DIALOG
    send(range(0, 50))
    drain(total // 5)
    child_a.kill9()  # the sender side dies with messages in flight
    proxy_a.retarget(child_a.start())
    send(range(50, PER_DIALOG))
    drain(total * 3 // 5)
    child_b.kill9()  # the receiver side dies while applying batches
    proxy_b.retarget(child_b.start())
    drain(total)
    print(f"proxies: {proxy_a.counters} {proxy_b.counters}")

    assert len(got) == DIALOGS
    for bodies in got.values():
        d = bodies[0].split(":")[0]
        assert bodies == [f"{d}:{r}" for r in range(PER_DIALOG)]  # once each, in order
    wait_for(lambda: not sender.view("transmission_queue"), timeout=60,
             what="every message acknowledged")
    assert child_a.stop() == 0 and child_b.stop() == 0  # SIGTERM: a clean stop
    assert proxy_a.counters.dropped + proxy_b.counters.dropped > 0


def test_sbroker_serve_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    db = _setup(tmp_path, "s", "Svc", [])
    proc = subprocess.Popen(
        [sys.executable, "-m", "sbroker.cli", "--db", str(db), "serve"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()))  # type: ignore[union-attr]
        reader.start()
        reader.join(60)
        assert line and "listening on 127.0.0.1:" in line[0]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        with sbroker.Broker.open(db) as b:
            assert b.view("dm_broker_connections") == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()
