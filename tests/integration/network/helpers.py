"""Helpers for the network tier: brokers with endpoints on loopback, and bounded waits."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sbroker
from sbroker.core.messages import Message

SECRET = "network tier secret"
FAST: dict[str, Any] = {"retry_initial": 0.2, "retry_max": 2.0}  # quick retransmission
DEADLINE = 30.0  # seconds; a loaded 2-core machine must never reach it


def wait_for(predicate: Callable[[], Any], timeout: float = DEADLINE, what: str = "") -> Any:
    """Poll ``predicate`` until it is truthy (its value) or fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < end, f"timed out waiting for {what or predicate}"
        time.sleep(0.02)


def node(tmp_path: Path, name: str, *, services: dict[str, list[str]] | None = None,
         start: bool = True, instrumentation: sbroker.Instrumentation | None = None,
         **endpoint: Any) -> sbroker.Broker:
    """A broker ``name`` with queue ``q`` serving ``services`` and an endpoint on port 0."""
    b = sbroker.Broker.open(tmp_path / f"{name}.db", instrumentation=instrumentation)
    b.create_queue("q")
    for service, contracts in (services or {}).items():
        b.create_service(service, "q", contracts)
    options = {"secret": SECRET, **FAST, **endpoint}
    b.create_endpoint(port=0, **options)
    if start:
        b.start()
    return b


def port(b: sbroker.Broker) -> int:
    address = b.network.address
    assert address is not None
    return address[1]


def route(src: sbroker.Broker, service: str, dst: sbroker.Broker | int, **kw: Any) -> None:
    p = dst if isinstance(dst, int) else port(dst)
    src.create_route(f"to-{service}-{p}", service, f"tcp://127.0.0.1:{p}", **kw)


def receive(b: sbroker.Broker, count: int, queue: str = "q",
            timeout: float = DEADLINE) -> list[Message]:
    """Receive (and commit) until ``count`` messages came, or fail at the deadline."""
    got: list[Message] = []
    end = time.monotonic() + timeout
    while len(got) < count:
        left = end - time.monotonic()
        assert left > 0, f"received {len(got)} of {count} messages"
        with b.transaction() as tx:
            got += tx.receive(queue, timeout=min(left, 1.0))
    return got


def tq(b: sbroker.Broker) -> list[dict[str, Any]]:
    return b.view("transmission_queue")


def endpoints(b: sbroker.Broker) -> list[dict[str, Any]]:
    return b.view("conversation_endpoints")
