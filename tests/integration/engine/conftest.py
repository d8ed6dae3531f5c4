"""Fixtures of the engine tier: child processes that are always reaped."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from support.helpers import Child


@pytest.fixture
def spawn() -> Iterator[Callable[..., Child]]:
    """``spawn(command, db, *args)`` starts ``child.py``; every child is killed at teardown."""
    started: list[Child] = []

    def start(*args: object, durability: str = "normal") -> Child:
        child = Child(*args, durability=durability)
        started.append(child)
        return child

    yield start
    for child in started:
        child.close()
