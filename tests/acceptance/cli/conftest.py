"""Fixtures of the CLI acceptance tests."""

from __future__ import annotations

import pytest
from support.tsql_cli import SqlRunner


@pytest.fixture
def sql(database: str) -> SqlRunner:
    """``sbroker sql`` on a fresh broker database (``database`` of tests/conftest.py)."""
    return SqlRunner(database)
