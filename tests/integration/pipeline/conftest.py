"""Pipeline tests run without a JVM: tasks go to a StubRunner (through a LocalScheduler, or
the executor of a broker on each backend)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# `python = "pipeline_task_helpers:..."` targets of the tests import from this folder
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh broker database on each backend: a SQLite file, a PostgreSQL database."""
    if request.param == "sqlite":
        yield str(tmp_path / "broker.db")
        return
    server = request.getfixturevalue("postgres")
    url = server.new_database()
    yield url
    server.drop(url)
