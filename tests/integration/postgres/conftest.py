"""Fixtures of the PostgreSQL tier: a fresh database of the run's throwaway server, brokers on
it, and helper processes (``tests/support/child.py``) that each open it with a pool of
their own, as brokers on other hosts would."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from support.helpers import Child
from support.postgres import RunServer

import sbroker


@pytest.fixture
def pg_url(postgres: RunServer) -> Iterator[str]:
    url = postgres.new_database()
    yield url
    postgres.drop(url)


@pytest.fixture
def pg_pair(pg_url: str) -> Iterator[sbroker.Broker]:
    """A broker on ``pg_url`` with InitQueue/InitService and TargetQueue/TargetService."""
    b = sbroker.Broker.open(pg_url)
    b.create_queue("InitQueue")
    b.create_queue("TargetQueue")
    b.create_service("InitService", "InitQueue")
    b.create_service("TargetService", "TargetQueue", ["DEFAULT"])
    try:
        yield b
    finally:
        b.close()


@pytest.fixture
def spawn() -> Iterator[Callable[..., Child]]:
    """``spawn(command, url, *args)`` starts ``child.py``; every child is killed at teardown."""
    started: list[Child] = []

    def start(*args: object, **options: object) -> Child:
        child = Child(*args, **options)  # type: ignore[arg-type]
        started.append(child)
        return child

    yield start
    for child in started:
        child.close()
