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
