"""The scheduler's SQL: one file of named blocks per dialect (``sqlite.sql``, ...)."""

from __future__ import annotations

from sbroker.apps.sql import read, statements
from sbroker.engine.api import BrokerAPI
from sbroker.storage.queries import Queries

__all__ = ["read", "sql"]


def sql(broker: BrokerAPI) -> Queries:
    """The scheduler's statements for the broker's backend."""
    return statements(broker, "sbroker.apps.scheduler")
