"""T-SQL on a broker, once per storage backend (a fresh database each test)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import sbroker


@pytest.fixture
def broker(database: str) -> Iterator[sbroker.Broker]:
    b = sbroker.Broker.open(database)
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def tsql(broker: sbroker.Broker) -> Callable[..., list[list[dict[str, Any]]]]:
    """``tsql(text)``: the result sets of a script on the test's broker."""
    return broker.execute_tsql
