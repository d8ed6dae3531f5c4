"""Fixtures of the network tier."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import sbroker


@pytest.fixture
def nodes() -> Iterator[list[sbroker.Broker]]:
    """Brokers a test opens (append them): closed at the end, whatever happened."""
    opened: list[sbroker.Broker] = []
    yield opened
    for b in opened:
        b.close()
