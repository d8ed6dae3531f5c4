"""Two brokers' real network services (receiver, transmitter, protocol sessions, stores) over
an in-memory wire that drops, duplicates and reorders frames, on a fake clock."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import pytest

import sbroker
from sbroker import FakeClock

from .helpers import SECRET
from .memory_wire import Faults, Wire

DIALOGS = 4
PER_DIALOG = 2_500  # 10,000 messages in all
PER_TRANSACTION = 500


def _node(path: Path, wire: Wire, clock: FakeClock, service: str,
          contracts: list[str]) -> sbroker.Broker:
    b = sbroker.Broker.open(path, clock=clock, start=False)
    b.network.transport_factory = wire.transport
    b.create_queue("q")
    b.create_service(service, "q", contracts)
    b.create_endpoint(port=0, secret=SECRET, retry_initial=0.2, retry_max=2.0)
    b.start()
    return b


def _received(b: sbroker.Broker) -> dict[str, list[sbroker.Message]]:
    """Everything in b's queue, per conversation, in RECEIVE order."""
    got: dict[str, list[sbroker.Message]] = defaultdict(list)
    while True:
        with b.transaction() as tx:
            batch = tx.receive("q", timeout=0)
        if not batch:
            return got
        for msg in batch:
            got[str(msg.conversation_handle)].append(msg)


@pytest.mark.parametrize("seed", [39])
def test_ten_thousand_messages_arrive_once_and_in_order_over_a_lossy_wire(
        tmp_path: Path, nodes: list[sbroker.Broker], seed: int) -> None:
    clock = FakeClock()
    wire = Wire(clock, seed, Faults(drop=0.05, duplicate=0.05, reorder=0.05))
    a = _node(tmp_path / "a.db", wire, clock, "SvcA", [])
    b = _node(tmp_path / "b.db", wire, clock, "SvcB", ["DEFAULT"])
    nodes += [a, b]
    address = b.network.address
    assert address is not None
    a.create_route("to-b", "SvcB", f"tcp://{address[0]}:{address[1]}")
    started, cpu = time.perf_counter(), time.process_time()
    with a.transaction() as tx:
        handles = [tx.begin_dialog("SvcA", "SvcB") for _ in range(DIALOGS)]
    for first in range(0, PER_DIALOG, PER_TRANSACTION):
        with a.transaction() as tx:
            for n in range(first, first + PER_TRANSACTION):
                for d, h in enumerate(handles):
                    tx.send(h, body=f"{d}:{n}")
    total = DIALOGS * PER_DIALOG
    sent = time.perf_counter()
    wire.run(lambda: wire.counts.delivered[address] >= total and wire.quiet())
    carried = time.perf_counter()
    got = _received(b)
    elapsed = time.perf_counter() - started
    received = elapsed - (carried - started)
    cpu = time.process_time() - cpu
    print(f"\n{total} messages over the lossy wire in {elapsed:.2f} s of wall time (send"
          f" {sent - started:.2f}, wire {carried - sent:.2f}, receive {received:.2f}; CPU"
          f" {cpu:.2f} s),"
          f" {clock.monotonic() - 1_700_000_000.0:.1f} s on the fake clock; {wire.counts}")

    assert wire.counts.delivered[address] == total  # each applied once by the receiver
    assert sorted(len(msgs) for msgs in got.values()) == [PER_DIALOG] * DIALOGS
    dialogs = sorted(msgs[0].text().split(":")[0] for msgs in got.values())
    assert dialogs == [str(d) for d in range(DIALOGS)]
    for msgs in got.values():
        dialog = msgs[0].text().split(":")[0]
        assert [x.text() for x in msgs] == [f"{dialog}:{n}" for n in range(PER_DIALOG)]
        assert [x.message_sequence_number for x in msgs] == list(range(PER_DIALOG))
    counts = wire.counts
    assert counts.dropped and counts.duplicated and counts.reordered  # the faults really happened
    for transport in wire.transports.values():  # every message acknowledged to its sender
        assert not any(e.unacked_messages for e in transport.engines.values())
