"""Raw SQLite as the machine's limit: a bare table, one INSERT or DELETE per commit."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from bench.systems.base import Client, Durability, System, poll

PRAGMAS = {"normal": "NORMAL", "full": "FULL"}


def connect(path: Path, durability: Durability) -> sqlite3.Connection:
    """An autocommit connection in WAL mode with the synchronous level of `durability`."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={PRAGMAS[durability]}")
    return conn


class SqliteClient(Client):
    """One connection; each call is one BEGIN IMMEDIATE ... COMMIT."""

    def __init__(self, path: Path, durability: Durability) -> None:
        self.conn = connect(path, durability)

    def send_one(self, body: bytes) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("INSERT INTO q (body) VALUES (?)", (body,))
        self.conn.execute("COMMIT")

    def send_batch(self, bodies: list[bytes]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany("INSERT INTO q (body) VALUES (?)", [(b,) for b in bodies])
        self.conn.execute("COMMIT")

    def _take(self, n: int) -> list[bytes] | None:
        self.conn.execute("BEGIN IMMEDIATE")
        rows = self.conn.execute(
            "DELETE FROM q WHERE id IN (SELECT id FROM q ORDER BY id LIMIT ?) RETURNING body",
            (n,)).fetchall()
        self.conn.execute("COMMIT")
        return [r[0] for r in rows] or None

    def receive_one(self, timeout: float) -> bytes | None:
        got = poll(lambda: self._take(1), timeout)
        return got[0] if got else None

    def receive_batch(self, n: int, timeout: float) -> list[bytes]:
        return poll(lambda: self._take(n), timeout) or []

    def close(self) -> None:
        self.conn.close()


class RawSqlite(System):
    """The bound SQLite puts on any queue built on it in this machine."""

    name = "sqlite (raw)"
    kind = "limit"

    def durability_note(self, durability: Durability) -> str:
        return f"WAL, synchronous={PRAGMAS[durability]}"

    def setup(self, workdir: Path, durability: Durability) -> None:
        self.path = workdir / "raw.db"
        self.durability = durability
        with closing(connect(self.path, durability)) as conn:
            conn.execute("CREATE TABLE q (id INTEGER PRIMARY KEY AUTOINCREMENT, body BLOB)")

    def client(self, slot: int = 0, slots: int = 1) -> Client:
        return SqliteClient(self.path, self.durability)
