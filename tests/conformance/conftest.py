"""The conformance suite: the engine's behaviour through its public API, run once per storage
backend.  Every test here gets its databases from these fixtures, never from a path of its
own, so that a new backend only adds a parameter to ``BACKENDS``.

- ``new_target()``: the target (what ``Broker.open`` takes) of a fresh, empty database (a
  file on SQLite, a database of the run's throwaway server on PostgreSQL);
- ``db_path``: one such target, the test's main database;
- ``broker`` / ``pair``: a broker on ``db_path`` (``pair`` with InitQueue/InitService and
  TargetQueue/TargetService on the DEFAULT contract).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import sbroker

BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def new_target(backend: str, tmp_path: Path, request: pytest.FixtureRequest
               ) -> Iterator[Callable[[], str]]:
    """A callable returning the target of a fresh, empty database on the backend (on
    PostgreSQL a new database of the run's server, dropped after the test)."""
    numbers = itertools.count(1)
    made: list[str] = []

    def make() -> str:
        if backend == "postgres":
            made.append(request.getfixturevalue("postgres").new_database())
            return made[-1]
        return str(tmp_path / f"broker-{next(numbers)}.db")

    yield make
    for url in made:
        request.getfixturevalue("postgres").drop(url)


@pytest.fixture
def db_path(new_target: Callable[[], str]) -> str:
    return new_target()


@pytest.fixture
def broker(db_path: str) -> Iterator[sbroker.Broker]:
    b = sbroker.Broker.open(db_path)
    try:
        yield b
    finally:
        b.close()
