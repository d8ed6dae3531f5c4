"""A PostgreSQL queue table read with FOR UPDATE SKIP LOCKED, the way PGQueuer does it.

Enqueue is an INSERT whose statement trigger NOTIFYs listeners; dequeue marks the oldest queued
rows 'picked' (one transaction), then the ack deletes them (a second one), as PGQueuer's
dequeue / log_jobs and procrastinate's fetch_job / finish_job do.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from bench.systems.base import Client, Durability, System

SCHEMA = """
CREATE TABLE {t} (
    id bigserial PRIMARY KEY,
    status text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'picked')),
    created timestamptz NOT NULL DEFAULT now(),
    updated timestamptz NOT NULL DEFAULT now(),
    payload bytea NOT NULL
);
CREATE INDEX {t}_queued ON {t} (id) WHERE status = 'queued';
CREATE FUNCTION {t}_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_notify('{t}', 'insert'); RETURN NULL; END $$;
CREATE TRIGGER {t}_notify AFTER INSERT ON {t}
    FOR EACH STATEMENT EXECUTE FUNCTION {t}_notify();
"""

DEQUEUE = """
WITH next_job AS (
    SELECT id FROM {t} WHERE status = 'queued'
    ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED)
UPDATE {t} SET status = 'picked', updated = now()
FROM next_job WHERE {t}.id = next_job.id
RETURNING {t}.id, {t}.payload
"""

SYNC = {"normal": "off", "full": "on"}
T = TypeVar("T")


class Notified(Client):
    """A client on one autocommit connection that waits for a NOTIFY between its tries."""

    def __init__(self, conninfo: str) -> None:
        import psycopg

        self.conn = psycopg.connect(conninfo, autocommit=True)
        self.listening = False
        self.notified = False

    def _on_notify(self, _: Any) -> None:
        self.notified = True

    def take_or_wait(self, take: Callable[[], T], channel: str, timeout: float) -> T:
        """``take()`` until it returns something or ``timeout`` s pass, LISTENing on
        ``channel`` meanwhile."""
        if timeout > 0 and not self.listening:
            self.conn.add_notify_handler(self._on_notify)
            self.conn.execute(f"LISTEN {channel}")
            self.listening = True
        deadline = time.perf_counter() + timeout
        while True:
            self.notified = False
            got = take()
            remaining = deadline - time.perf_counter()
            if got or remaining <= 0:
                return got
            if not self.notified:  # an insert during take was already seen: try again
                for _ in self.conn.notifies(timeout=min(remaining, 0.5), stop_after=1):
                    pass

    def close(self) -> None:
        self.conn.close()


class PostgresClient(Notified):
    """One connection per thread, autocommit, explicit transactions, LISTENing for inserts."""

    def __init__(self, dsn: str, table: str, durability: Durability) -> None:
        super().__init__(dsn)
        self.conn.execute(f"SET synchronous_commit = {SYNC[durability]}")
        self.table = table
        self.insert = f"INSERT INTO {table} (payload) VALUES (%s)"
        self.dequeue = DEQUEUE.format(t=table)

    def send_one(self, body: bytes) -> None:
        self.conn.execute(self.insert, (body,))

    def send_batch(self, bodies: list[bytes]) -> None:
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.executemany(self.insert, [(b,) for b in bodies])

    def _take(self, n: int) -> list[bytes]:
        rows = self.conn.execute(self.dequeue, (n,)).fetchall()
        if rows:
            self.conn.execute(f"DELETE FROM {self.table} WHERE id = ANY(%s)",
                              ([r[0] for r in rows],))
        return [bytes(r[1]) for r in rows]

    def receive_batch(self, n: int, timeout: float) -> list[bytes]:
        return self.take_or_wait(lambda: self._take(n), self.table, timeout)

    def receive_one(self, timeout: float) -> bytes | None:
        rows = self.receive_batch(1, timeout)
        return rows[0] if rows else None


class Postgres(System):
    """A fresh queue table per run on the suite's loopback PostgreSQL server."""

    name = "postgres"
    backend = "postgres"
    module = "psycopg"
    servers = ("postgres",)
    waits_by = "LISTEN/NOTIFY (trigger on insert)"
    runs = 0

    def durability_note(self, durability: Durability) -> str:
        return f"synchronous_commit={SYNC[durability]}, fsync=on"

    def setup(self, workdir: Path, durability: Durability) -> None:
        import psycopg

        Postgres.runs += 1
        self.dsn = self.pool.get("postgres").dsn()  # type: ignore[attr-defined]
        self.table = f"bench_queue_{Postgres.runs}"
        self.durability = durability
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(SCHEMA.format(t=self.table))

    def client(self, slot: int = 0, slots: int = 1) -> Client:
        return PostgresClient(self.dsn, self.table, self.durability)

    def teardown(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE {self.table}; DROP FUNCTION {self.table}_notify()")
