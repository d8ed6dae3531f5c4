"""huey's SqliteStorage at the storage level: enqueue; dequeue (no worker processes)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from bench.systems.base import Client, Durability, System, poll
from bench.systems.sqlite import PRAGMAS


class HueyClient(Client):
    """The shared storage; huey keeps one SQLite connection per thread itself."""

    def __init__(self, storage: Any) -> None:
        self.storage = storage

    def send_one(self, body: bytes) -> None:
        self.storage.enqueue(body)

    def receive_one(self, timeout: float) -> bytes | None:
        got: bytes | None = poll(self.storage.dequeue, timeout)
        return got


class Huey(System):
    """SqliteStorage with its synchronous level set to the durability (huey's default is OFF)."""

    name = "huey"
    module = "huey"
    no_batch_send = "SqliteStorage commits every enqueue; it has no batch enqueue"
    no_batch_receive = "SqliteStorage commits every dequeue; it has no batch dequeue"

    def durability_note(self, durability: Durability) -> str:
        return f"WAL, synchronous={PRAGMAS[durability]} (its default is OFF)"

    def setup(self, workdir: Path, durability: Durability) -> None:
        from huey.storage import SqliteStorage

        pragma = PRAGMAS[durability]

        class Storage(SqliteStorage):  # type: ignore[misc]
            def _create_connection(self) -> sqlite3.Connection:
                conn: sqlite3.Connection = super()._create_connection()
                conn.execute(f"PRAGMA synchronous={pragma}")
                return conn

        self.storage = Storage(name="bench", filename=str(workdir / "huey.db"))

    def client(self, slot: int = 0, slots: int = 1) -> Client:
        return HueyClient(self.storage)

    def teardown(self) -> None:
        self.storage.close()
