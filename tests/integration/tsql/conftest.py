"""T-SQL on a broker, once per storage backend (a fresh database each test)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import sbroker


@pytest.fixture(params=["sqlite", "postgres"])
def broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[sbroker.Broker]:
    if request.param == "postgres":
        server = request.getfixturevalue("postgres")
        url = server.new_database()
        b = sbroker.Broker.open(url)
        try:
            yield b
        finally:
            b.close()
            server.drop(url)
    else:
        b = sbroker.Broker.open(tmp_path / "broker.db")
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def tsql(broker: sbroker.Broker) -> Callable[..., list[list[dict[str, Any]]]]:
    """``tsql(text)``: the result sets of a script on the test's broker."""
    return broker.execute_tsql
