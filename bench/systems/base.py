"""The one interface every benchmarked system implements, and helpers they share."""

from __future__ import annotations

import importlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal, TypeVar

if TYPE_CHECKING:
    from bench.servers import ServerPool

Durability = Literal["normal", "full"]
Kind = Literal["subject", "peer", "limit"]
T = TypeVar("T")

POLL_INTERVAL = 0.001
"""Seconds between polls for systems whose only way to wait is to poll (said in the table)."""


class Unavailable(Exception):
    """This system cannot run here (missing package, server, or engine); the reason is the text."""


class Client(ABC):
    """One thread's handle on a system: it sends and receives, each call one transaction."""

    @abstractmethod
    def send_one(self, body: bytes) -> None:
        """Send one message in its own committed transaction."""

    def send_batch(self, bodies: list[bytes]) -> None:
        """Send all bodies in one committed transaction."""
        raise NotImplementedError

    @abstractmethod
    def receive_one(self, timeout: float) -> bytes | None:
        """Receive and commit (ack) one message, waiting up to `timeout` s; None if none came."""

    def receive_batch(self, n: int, timeout: float) -> list[bytes]:
        """Receive and commit up to `n` messages in one transaction, waiting up to `timeout` s."""
        raise NotImplementedError

    def close(self) -> None:
        """Release this client's connections."""
        return None


class System(ABC):
    """A queue under test: set up fresh for every run, handing out one client per thread."""

    name: ClassVar[str]
    kind: ClassVar[Kind] = "peer"
    backend: ClassVar[str] = "sqlite"
    """Where it keeps its messages; a ratio compares sbroker with peers of its own backend."""
    servers: ClassVar[tuple[str, ...]] = ()
    waits_by: ClassVar[str] = f"poll every {POLL_INTERVAL * 1000:g} ms"
    no_batch_send: ClassVar[str | None] = None
    """Why this system cannot send 100 messages in one transaction (W2 send is n/a), or None."""
    no_batch_receive: ClassVar[str | None] = None
    """Why it cannot receive 100 in one transaction (W2 receive is n/a), or None."""
    no_concurrency: ClassVar[str | None] = None
    """Why this system cannot run 8 producers + 8 consumers (W3 prints n/a), or None."""

    def __init__(self, pool: ServerPool) -> None:
        self.pool = pool

    module: ClassVar[str | None] = None
    """The client library to import; a missing one makes every figure n/a."""

    @classmethod
    def check(cls) -> None:
        """Raise Unavailable if the system's library is missing."""
        if cls.module:
            try:
                importlib.import_module(cls.module)
            except ImportError as exc:
                raise Unavailable(f"{cls.module} not importable ({exc}); "
                                  "run bench/setup.sh") from exc

    @abstractmethod
    def durability_note(self, durability: Durability) -> str:
        """What `durability` means for this system, in a few words."""

    @abstractmethod
    def setup(self, workdir: Path, durability: Durability) -> None:
        """Create an empty queue in `workdir` (or on the system's server)."""

    @abstractmethod
    def client(self, slot: int = 0, slots: int = 1) -> Client:
        """A client for the calling thread, the `slot`-th of `slots` concurrent senders."""

    def teardown(self) -> None:
        """Drop the queue and close shared resources."""
        return None


def poll(attempt: Callable[[], T | None], timeout: float) -> T | None:
    """Call `attempt` until it returns something or `timeout` s pass, sleeping between tries."""
    result = attempt()
    if result is not None or timeout <= 0:
        return result
    deadline = time.perf_counter() + timeout
    while result is None and time.perf_counter() < deadline:
        time.sleep(POLL_INTERVAL)
        result = attempt()
    return result
