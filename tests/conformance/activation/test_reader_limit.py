"""Real threads on the system clock: activated readers ramp up to max_queue_readers and never
beyond, and drain a backlog spread over many conversation groups."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from sbroker import Activation, Broker
from sbroker.services.activation import ActivationContext


@pytest.fixture
def real_broker() -> Iterator[Broker]:
    b = Broker.open(":memory:", monitor_interval=0.05)
    b.create_queue("InitQ")
    b.create_service("Init", "InitQ")
    yield b
    b.close()


class Counting:
    """Receives one group per transaction, 'works' briefly, tracks how many run at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.got: list[str] = []

    def __call__(self, ctx: ActivationContext) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            while not ctx.stopping.is_set():
                with ctx.broker.transaction() as tx:
                    msgs = tx.receive(ctx.queue)
                    if not msgs:
                        return
                    time.sleep(0.01)  # the work a reader does per group
                    with self.lock:
                        self.got.extend(m.text() for m in msgs)
        finally:
            with self.lock:
                self.now -= 1


@pytest.mark.parametrize("limit", [1, 3])
def test_activated_readers_reach_but_never_exceed_max_queue_readers(
        real_broker: Broker, limit: int) -> None:
    b = real_broker
    proc = Counting()
    b.create_queue("TQ", activation=Activation(proc, max_queue_readers=limit))
    b.create_service("Target", "TQ", ["DEFAULT"])
    with b.transaction() as tx:
        for i in range(150):
            tx.send(tx.begin_dialog("Init", "Target"), body=f"m{i}")
    svc = b._activation
    b.start()
    assert svc.wait_for(lambda: len(proc.got) == 150 and svc.running_tasks() == 0, 60)
    assert proc.most == limit
    assert sorted(proc.got) == sorted(f"m{i}" for i in range(150))
    row = b.view("dm_broker_queue_monitors")[0]
    assert row["tasks_failed"] == 0
    assert limit <= row["tasks_started"]
