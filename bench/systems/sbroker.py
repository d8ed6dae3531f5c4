"""sbroker itself, through its public API only: on a SQLite file, and on a database of the
suite's PostgreSQL server (docs/postgresql.md)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from bench.systems.base import Client, Durability, System
from bench.systems.postgres import SYNC

CONVERSATIONS = 100
"""Dialogs begun at setup; sends go round-robin over them (W1 and W2)."""


class SbrokerClient(Client):
    """A thread's sender/receiver on the shared Broker; every call is one broker transaction.

    Concurrent senders each own a disjoint share of the conversations, as an application's
    producers would, so that they do not queue behind each other on one dialog.
    """

    def __init__(self, broker: Any, handles: list[Any]) -> None:
        self.broker = broker
        self.handles = itertools.cycle(handles)

    def send_one(self, body: bytes) -> None:
        with self.broker.transaction() as tx:
            tx.send(next(self.handles), "DEFAULT", body)

    def send_batch(self, bodies: list[bytes]) -> None:
        with self.broker.transaction() as tx:
            for body in bodies:
                tx.send(next(self.handles), "DEFAULT", body)

    def receive_batch(self, n: int, timeout: float) -> list[bytes]:
        with self.broker.transaction() as tx:
            msgs = tx.receive("q", top=n, timeout=timeout)
        return [bytes(m.message_body) for m in msgs]

    def receive_one(self, timeout: float) -> bytes | None:
        got = self.receive_batch(1, timeout)
        return got[0] if got else None


class Sbroker(System):
    """One Broker per run: queues q/qi, services svc_i -> svc_t, 100 dialogs begun up front."""

    name = "sbroker"
    module = "sbroker"
    kind = "subject"
    waits_by = "tx.receive(q, timeout=...)"

    def durability_note(self, durability: Durability) -> str:
        return f'durability="{durability}"'

    def target(self, workdir: Path) -> str:
        """What Broker.open takes for this run."""
        return str(workdir / "sbroker.db")

    def setup(self, workdir: Path, durability: Durability) -> None:
        from sbroker import Broker

        self.broker = Broker.open(self.target(workdir), durability=durability)
        self.broker.create_queue("qi")
        self.broker.create_queue("q")
        self.broker.create_service("svc_i", "qi")
        self.broker.create_service("svc_t", "q", contracts=["DEFAULT"])
        with self.broker.transaction() as tx:
            self.handles = [tx.begin_dialog("svc_i", "svc_t") for _ in range(CONVERSATIONS)]

    def client(self, slot: int = 0, slots: int = 1) -> Client:
        return SbrokerClient(self.broker, self.handles[slot::slots])

    def teardown(self) -> None:
        self.broker.close()


class SbrokerPostgres(Sbroker):
    """The same on a fresh database of the suite's PostgreSQL server per run."""

    name = "sbroker (postgres)"
    backend = "postgres"
    servers = ("postgres",)
    runs = itertools.count(1)

    def durability_note(self, durability: Durability) -> str:
        return f'durability="{durability}" (synchronous_commit={SYNC[durability]}), fsync=on'

    def target(self, workdir: Path) -> str:
        server = self.pool.get("postgres")
        return str(server.create_database(f"bench_sbroker_{next(self.runs)}"))  # type: ignore[attr-defined]
