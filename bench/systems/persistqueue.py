"""persist-queue's SQLiteAckQueue: put; get + ack (each its own commit)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from bench.systems.base import Client, Durability, System
from bench.systems.sqlite import PRAGMAS


class PersistQueueClient(Client):
    """A thread's view of the one shared queue object (its documented multithreading mode)."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue

    def send_one(self, body: bytes) -> None:
        self.queue.put(body)

    def receive_one(self, timeout: float) -> bytes | None:
        from persistqueue.exceptions import Empty

        try:
            item = self.queue.get(block=timeout > 0, timeout=timeout or None, raw=True)
        except Empty:
            return None
        self.queue.ack(id=item["pqid"])
        body: bytes = item["data"]
        return body


class PersistQueue(System):
    """SQLiteAckQueue with multithreading=True, its synchronous level set to the durability."""

    name = "persist-queue"
    module = "persistqueue"
    waits_by = "get(block=True): in-process Event set by put"
    no_batch_send = "SQLiteAckQueue commits every put (auto_commit is forced on)"
    no_batch_receive = "SQLiteAckQueue commits every get and ack (auto_commit is forced on)"

    def durability_note(self, durability: Durability) -> str:
        return f"WAL, synchronous={PRAGMAS[durability]} (its default is FULL)"

    def setup(self, workdir: Path, durability: Durability) -> None:
        from persistqueue import SQLiteAckQueue

        pragma = PRAGMAS[durability]

        class Queue(SQLiteAckQueue):  # type: ignore[misc]
            def _new_db_connection(self, *args: Any) -> sqlite3.Connection:
                conn: sqlite3.Connection = super()._new_db_connection(*args)
                conn.execute(f"PRAGMA synchronous={pragma}")
                return conn

        self.queue = Queue(str(workdir / "pq"), multithreading=True, auto_resume=False)

    def client(self, slot: int = 0, slots: int = 1) -> Client:
        return PersistQueueClient(self.queue)

    def teardown(self) -> None:
        self.queue.close()
