"""What the engine tells background services (activation monitors listen here): a list of
listeners, each told in turn, in the manner of dramatiq's middleware.  With none, a broker
that is not started stays passive."""

from __future__ import annotations

import logging
from collections.abc import Iterable

log = logging.getLogger("sbroker.engine")


class Listener:
    """Override what you need; every method is called after the fact, outside any database
    transaction, and must not touch the database."""

    def arrived(self, queue_ids: Iterable[int]) -> None:
        """Ready messages were committed into these queues."""

    def received(self, queue_id: int, *, empty: bool) -> None:
        """An unfiltered RECEIVE / GET CONVERSATION GROUP returned (``empty``: nothing)."""

    def waiting(self, queue_id: int, delta: int) -> None:
        """A session started (+1) or stopped (-1) waiting in an unfiltered RECEIVE."""

    def rolled_back(self, queue_ids: Iterable[int]) -> None:
        """A transaction that received from these queues rolled back."""

    def altered(self, queue_name: str) -> None:
        """ALTER QUEUE ran (or the queue was created, dropped or disabled)."""

    def transmitted(self) -> None:
        """Rows were committed into the transmission queue (messages for another broker,
        or waiting for a route or a disabled queue)."""


class Listeners(Listener):
    """The engine's listeners; calling a method here calls it on each of them."""

    def __init__(self) -> None:
        self._all: tuple[Listener, ...] = ()

    def add(self, listener: Listener) -> None:
        self._all = (*self._all, listener)

    def remove(self, listener: Listener) -> None:
        self._all = tuple(x for x in self._all if x is not listener)

    def arrived(self, queue_ids: Iterable[int]) -> None:
        ids = tuple(queue_ids)
        for x in self._all:
            x.arrived(ids)

    def received(self, queue_id: int, *, empty: bool) -> None:
        for x in self._all:
            x.received(queue_id, empty=empty)

    def waiting(self, queue_id: int, delta: int) -> None:
        for x in self._all:
            x.waiting(queue_id, delta)

    def rolled_back(self, queue_ids: Iterable[int]) -> None:
        ids = tuple(queue_ids)
        for x in self._all:
            x.rolled_back(ids)

    def altered(self, queue_name: str) -> None:
        for x in self._all:
            x.altered(queue_name)

    def transmitted(self) -> None:
        for x in self._all:
            x.transmitted()
