"""litequeue: put; pop + done (each its own commit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.systems.base import Client, Durability, System, poll
from bench.systems.sqlite import PRAGMAS


class LiteQueueClient(Client):
    """One LiteQueue (one connection) per thread: a shared one is not safe across threads."""

    def __init__(self, path: Path, durability: Durability) -> None:
        from litequeue import LiteQueue

        self.queue: Any = LiteQueue(str(path), queue_name="bench", timeout=30)
        self.queue.conn.execute(f"PRAGMA synchronous={PRAGMAS[durability]}")

    def send_one(self, body: bytes) -> None:
        self.queue.put(body.decode())

    def send_batch(self, bodies: list[bytes]) -> None:
        with self.queue.transaction("IMMEDIATE"):
            for body in bodies:
                self.queue.put(body.decode())

    def _pop(self) -> bytes | None:
        msg = self.queue.pop()
        if msg is None:
            return None
        self.queue.done(msg.message_id)
        return str(msg.data).encode()

    def receive_one(self, timeout: float) -> bytes | None:
        return poll(self._pop, timeout)

    def close(self) -> None:
        self.queue.conn.close()


class LiteQueue(System):
    """LiteQueue with synchronous=NORMAL (its own setting) or FULL."""

    name = "litequeue"
    module = "litequeue"
    no_batch_receive = "pop() always opens its own transaction: no way to receive 100 in one"

    def durability_note(self, durability: Durability) -> str:
        return f"WAL, synchronous={PRAGMAS[durability]}"

    def setup(self, workdir: Path, durability: Durability) -> None:
        self.path = workdir / "litequeue.db"
        self.durability = durability
        LiteQueueClient(self.path, durability).close()  # create the table once

    def client(self, slot: int = 0, slots: int = 1) -> Client:
        return LiteQueueClient(self.path, self.durability)
