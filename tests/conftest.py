"""Shared fixtures: a broker on a real SQLite file with two services ready to talk, and the
run's throwaway PostgreSQL server (``postgres``: started on first use, stopped at the end)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.postgres import RunServer

import sbroker


@pytest.fixture
def own_imports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """What a test imports and puts on ``sys.path`` (pipeline files it loads) is gone
    after it: ``pytestmark = pytest.mark.usefixtures("own_imports")``."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        del sys.modules[name]


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


@pytest.fixture(scope="session")
def postgres() -> Iterator[RunServer]:
    """The run's PostgreSQL server: ``postgres.new_database()`` is a fresh database's URL."""
    server = RunServer()
    try:
        yield server
    finally:
        server.stop()
