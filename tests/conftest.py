"""Shared fixtures: a broker on a real SQLite file with two services ready to talk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import sbroker


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "broker.db"


@pytest.fixture
def broker(db_path: Path) -> Iterator[sbroker.Broker]:
    b = sbroker.Broker.open(db_path)
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def pair(broker: sbroker.Broker) -> sbroker.Broker:
    """``broker`` with InitQueue/InitService and TargetQueue/TargetService (DEFAULT contract)."""
    broker.create_queue("InitQueue")
    broker.create_queue("TargetQueue")
    broker.create_service("InitService", "InitQueue")
    broker.create_service("TargetService", "TargetQueue", ["DEFAULT"])
    return broker
