"""Shared fixtures for activation tests: a broker on a fake clock with a target queue."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from sbroker import Broker, FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def broker(clock: FakeClock, db_path: str) -> Iterator[Broker]:
    b = Broker.open(db_path, clock=clock, monitor_interval=5)
    b.activation.stop_timeout = 5.0
    b.create_queue("InitQ")
    b.create_service("Init", "InitQ")
    yield b
    b.close()


def _send(broker: Broker, count: int, *, groups: int | None = None, to: str = "Target") -> None:
    """``count`` messages over ``groups`` conversations (one conversation per group)."""
    groups = count if groups is None else groups
    with broker.transaction() as tx:
        handles = [tx.begin_dialog("Init", to) for _ in range(groups)]
        for i in range(count):
            tx.send(handles[i % groups], body=f"m{i}")


@pytest.fixture
def send() -> Callable[..., None]:
    """``send(broker, count, groups=None, to="Target")``."""
    return _send
