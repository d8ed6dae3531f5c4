"""Fixtures of the CLI acceptance tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.tsql_cli import SqlRunner


@pytest.fixture
def sql(database: str) -> SqlRunner:
    """``sbroker sql`` on a fresh broker database (``database`` of tests/conftest.py)."""
    return SqlRunner(database)


@pytest.fixture
def other_sql(database: str, tmp_path: Path,
              request: pytest.FixtureRequest) -> Iterator[SqlRunner]:
    """``sbroker sql`` on a second fresh database of the same backend as ``sql``'s."""
    if "://" not in database:
        yield SqlRunner(str(tmp_path / "other.db"))
        return
    server = request.getfixturevalue("postgres")
    url = server.new_database()
    try:
        yield SqlRunner(url)
    finally:
        server.drop(url)
