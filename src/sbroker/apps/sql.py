"""How applications keep their SQL: one file of named blocks per dialect in their package
(``sqlite.sql``, ...), run through the public API (``tx.execute``)."""

from __future__ import annotations

from typing import Any

from sbroker.engine.api import BrokerAPI
from sbroker.engine.transaction import Rows
from sbroker.storage.queries import Queries, load


def statements(broker: BrokerAPI, package: str) -> Queries:
    """The named statements of ``package`` for the broker's backend."""
    return load(package, f"{broker.dialect}.sql")


def read(broker: BrokerAPI, statement: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """The rows of a read-only statement (in a transaction of its own that locks nothing)."""
    with broker.transaction() as tx:
        return list(tx.execute(statement, params).fetchall())


def dicts(rows: Rows) -> list[dict[str, Any]]:
    """What a statement returned as dicts keyed by column name (name the columns in lower
    case in the SQL: PostgreSQL folds unquoted names so)."""
    names = [d[0] for d in rows.description]
    return [dict(zip(names, row, strict=True)) for row in rows.fetchall()]


def read_dicts(broker: BrokerAPI, statement: str,
               params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """The rows of a read-only statement as dicts keyed by column name."""
    with broker.transaction() as tx:
        return dicts(tx.execute(statement, params))
