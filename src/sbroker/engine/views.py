"""The view registry: the catalog and management views (docs/concepts.md, "Views") as named
statements of the store, and views that services and applications add (a callable returning
rows, or a named statement of their own)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sbroker.core.errors import NotFoundError
from sbroker.storage.ports import Connection, Store

#: Views every database has, each read by the store's statement ``view_<name>``.
STORED_VIEWS = (
    "conversation_endpoints", "conversation_groups", "transmission_queue", "service_queues",
    "services", "contracts", "message_types", "routes", "conversation_priorities",
    "dm_broker_queue_monitors", "dm_broker_activated_tasks", "dm_broker_sessions",
    "dm_broker_streams", "queue_stats",
)
Rows = list[dict[str, Any]]


def as_dicts(cursor: Any) -> Rows:
    """A cursor's rows as dicts keyed by column name."""
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


class Views:
    """``broker.view(name)``: stored views, and the ones services and applications add."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._providers: dict[str, Callable[[], Rows]] = {}
        self._statements: dict[str, Callable[[Connection], str]] = {}
        self._refreshers: dict[str, list[Callable[[], object]]] = {}

    def names(self) -> list[str]:
        return [*STORED_VIEWS, *sorted({*self._providers, *self._statements})]

    def add(self, name: str, provider: Callable[[], Rows]) -> None:
        """A view computed in this process (a callable returning a list of dicts)."""
        self._providers[name] = provider

    def add_statement(self, name: str, statement: Callable[[Connection], str]) -> None:
        """A view read from the database by ``statement(conn)`` (the SQL text, from the
        application's own named blocks for the connection's dialect)."""
        self._statements[name] = statement

    def before_read(self, names: Sequence[str], refresh: Callable[[], object]) -> None:
        """Bring stored rows up to date before these views are read here."""
        for name in names:
            self._refreshers.setdefault(name, []).append(refresh)

    def read(self, name: str) -> Rows:
        for refresh in self._refreshers.get(name, ()):
            refresh()
        provider = self._providers.get(name)
        if provider is not None:
            return list(provider())
        if name in STORED_VIEWS:
            with self._store.read() as conn:
                return as_dicts(conn.execute(conn.sql[f"view_{name}"]))
        statement = self._statements.get(name)
        if statement is not None:
            with self._store.read() as conn:
                return as_dicts(conn.execute(statement(conn)))
        with self._store.read() as conn:
            cursor = self._store.read_relation(conn, name)
            if cursor is not None:
                return as_dicts(cursor)
        raise NotFoundError(f"unknown view {name!r}: use one of {', '.join(self.names())}")
