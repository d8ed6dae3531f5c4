"""The broker's catalog snapshot: a statement may trust it for a few milliseconds, but never
past DDL that this process committed, even DDL that raced the check that took it."""

from __future__ import annotations

from typing import Any

import pytest

import sbroker
from sbroker.engine import catalog as catalog_module


@pytest.fixture
def db_path(database: str) -> str:
    """The test's broker database, on each backend (tests/conftest.py's ``database``)."""
    return database


def test_ddl_committed_during_a_check_is_seen_by_the_next_statement(
        broker: sbroker.Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    original = catalog_module.current_version
    raced: list[bool] = []

    def version_then_ddl(conn: Any) -> str:
        version = original(conn)  # the check reads the version before the DDL ...
        if not raced:
            raced.append(True)
            broker.create_queue("MadeMeanwhile")  # ... which commits before it stores its time
        return version

    with broker.db.connection() as conn:
        monkeypatch.setattr(catalog_module, "current_version", version_then_ddl)
        assert "MadeMeanwhile" not in broker.engine.catalog(conn).queues
        monkeypatch.setattr(catalog_module, "current_version", original)
        # within the trusted age of that check: it must not count as a check
        assert "MadeMeanwhile" in broker.engine.catalog(conn, max_age=60.0).queues


def test_a_statement_takes_the_snapshot_without_a_connection_only_after_a_clean_check(
        broker: sbroker.Broker, monkeypatch: pytest.MonkeyPatch) -> None:
    """``CatalogCache.fresh`` (what a statement asks first, before it takes a connection)
    trusts the same checks as ``get``: none that raced DDL, none before this process's DDL."""
    catalogs = broker.engine.catalogs
    original = catalog_module.current_version

    def version_then_ddl(conn: Any) -> str:
        version = original(conn)
        monkeypatch.setattr(catalog_module, "current_version", original)
        broker.create_queue("MadeMeanwhile")
        return version

    with broker.db.connection() as conn:
        monkeypatch.setattr(catalog_module, "current_version", version_then_ddl)
        broker.engine.catalog(conn)
        assert catalogs.fresh(60.0) is None  # the check raced DDL: no check
        broker.engine.catalog(conn)
    snapshot = catalogs.fresh(60.0)
    assert snapshot is not None and "MadeMeanwhile" in snapshot.queues
    assert catalogs.fresh(0.0) is None  # older than no time at all
    broker.create_queue("MadeLater")
    assert catalogs.fresh(60.0) is None  # this process's DDL: look again
    with broker.transaction() as tx:  # the statement looks, and finds it
        assert tx.receive("MadeLater", timeout=0) == []
