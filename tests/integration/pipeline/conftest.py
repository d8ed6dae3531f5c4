"""Pipeline tests run without a JVM: tasks go to a StubRunner (through the executor of a
broker on each backend)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.helpers import started

import sbroker
from sbroker.apps.spark import StubRunner

# `python = "pipeline_task_helpers:..."` targets of the tests import from this folder
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def stub() -> StubRunner:
    return StubRunner()


@pytest.fixture
def hosts(database: str) -> Iterator[list[sbroker.Broker]]:
    """Two started brokers on one database with the executor, as two servers would be."""
    brokers = [started(database, StubRunner()) for _ in range(2)]
    try:
        yield brokers
    finally:
        for b in brokers:
            b.close()
