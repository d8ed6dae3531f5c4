"""procrastinate (a PostgreSQL task queue) through its own schema and SQL functions.

Send is its sync ``Task.defer`` / ``batch_defer`` (one transaction each, through its own
connector and pool); receive is what its worker does for one job: ``procrastinate_fetch_job_v2``
(marks the oldest job 'doing', FOR UPDATE SKIP LOCKED) then ``procrastinate_finish_job_v1``
(deletes it), two transactions, waiting by LISTEN on its queue's channel.  Its worker's
asyncio loop and job dispatch are left out: only the storage path is measured.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from bench.systems.base import Client, Durability, System
from bench.systems.postgres import SYNC, Notified

QUEUE = "bench"
FETCH = ("SELECT id, args FROM procrastinate_fetch_job_v2(%s::varchar[], %s)")
FINISH = "SELECT procrastinate_finish_job_v1(%s, 'succeeded', true)"


class ProcrastinateClient(Notified):
    """A thread's deferrer (the app's pool) and worker connection (its own, registered)."""

    def __init__(self, system: Procrastinate) -> None:
        super().__init__(system.conninfo)
        self.task = system.task
        [(self.worker_id,)] = self.conn.execute(
            "SELECT procrastinate_register_worker_v1()").fetchall()

    def send_one(self, body: bytes) -> None:
        self.task.defer(body=body.hex())

    def send_batch(self, bodies: list[bytes]) -> None:
        self.task.batch_defer(*({"body": b.hex()} for b in bodies))

    def _take(self) -> bytes | None:
        row = self.conn.execute(FETCH, ([QUEUE], self.worker_id)).fetchone()
        if row is None or row[0] is None:
            return None
        self.conn.execute(FINISH, (row[0],))
        return bytes.fromhex(row[1]["body"])

    def receive_one(self, timeout: float) -> bytes | None:
        return self.take_or_wait(self._take, f'"procrastinate_queue_v1#{QUEUE}"', timeout)


class Procrastinate(System):
    """A fresh database with procrastinate's schema per run, on the suite's PostgreSQL."""

    name = "procrastinate"
    backend = "postgres"
    module = "procrastinate"
    servers = ("postgres",)
    waits_by = "LISTEN/NOTIFY (its trigger on insert)"
    no_batch_receive = "its worker fetches one job per call (procrastinate_fetch_job_v2)"
    runs = itertools.count(1)

    def durability_note(self, durability: Durability) -> str:
        return f"synchronous_commit={SYNC[durability]}, fsync=on"

    def setup(self, workdir: Path, durability: Durability) -> None:
        import procrastinate

        server = self.pool.get("postgres")
        self.database = f"bench_procrastinate_{next(self.runs)}"
        url = server.create_database(self.database)  # type: ignore[attr-defined]
        self.conninfo = f"{url}?options=-csynchronous_commit%3D{SYNC[durability]}"
        self.app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(
            conninfo=self.conninfo, min_size=1, max_size=16))
        self.app.open()
        self.app.schema_manager.apply_schema()
        self.task = self.app.task(name="bench", queue=QUEUE)(_job)

    def client(self, slot: int = 0, slots: int = 1) -> Client:
        return ProcrastinateClient(self)

    def teardown(self) -> None:
        self.app.close()


def _job(body: str) -> None:
    """The task the jobs name (never run here: the bench takes jobs off the queue itself)."""
