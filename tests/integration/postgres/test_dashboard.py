"""The dashboard (docs/dashboard.md) on a PostgreSQL broker database: every page, the JSON views
and the metrics read it with the dashboard's PostgreSQL statements."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

import sbroker
from sbroker.apps.dashboard import DashboardOptions, create_app
from sbroker.apps.dashboard.demo import fill

PAGES = ["/", "/queues/Orders", "/conversations", "/transmission", "/scheduler", "/poison",
         "/metrics"]


@pytest.fixture
def client(pg_url: str) -> TestClient:
    broker = sbroker.Broker.open(pg_url, monitor_interval=0.2)
    fill(broker)
    with TestClient(create_app(broker, DashboardOptions()),
                    raise_server_exceptions=True) as c:
        yield c
    broker.close()


def test_every_page_and_view_reads_a_postgresql_database(client: TestClient) -> None:
    for page in PAGES:
        response = client.get(page)
        assert response.status_code == 200, (page, response.text[:500])
    assert "sbroker_queue_messages" in client.get("/metrics").text
    for view in ("conversation_endpoints", "conversation_groups", "queue_stats",
                 "dm_broker_activated_tasks", "ExecutionLog", "ExecutionStatus"):
        response = client.get(f"/api/views/{view}")
        assert response.status_code == 200, (view, response.text[:500])
    log = client.get("/api/views/ExecutionLog").json()
    rows = log if isinstance(log, list) else log.get("rows", log)
    assert rows and "LogID" in rows[0] and "Worker" in rows[0]
