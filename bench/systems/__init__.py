"""The systems the suite measures, in table order: sbroker (on SQLite, on PostgreSQL), its
peers, then raw SQLite."""

from __future__ import annotations

from bench.systems.base import Client, Durability, System, Unavailable
from bench.systems.huey import Huey
from bench.systems.litequeue import LiteQueue
from bench.systems.persistqueue import PersistQueue
from bench.systems.postgres import Postgres
from bench.systems.procrastinate import Procrastinate
from bench.systems.rabbitmq import RabbitMQ
from bench.systems.sbroker import Sbroker, SbrokerPostgres
from bench.systems.sqlite import RawSqlite

SYSTEMS: list[type[System]] = [
    Sbroker, SbrokerPostgres, PersistQueue, Huey, LiteQueue, RabbitMQ, Postgres, Procrastinate,
    RawSqlite,
]

__all__ = ["SYSTEMS", "Client", "Durability", "System", "Unavailable"]
