"""A broker with two services and its dashboard behind Starlette's TestClient."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

import sbroker
from sbroker.apps.dashboard import DashboardOptions, create_app

Client = Callable[..., TestClient]


@pytest.fixture
def make_client(pair: sbroker.Broker) -> Iterator[Client]:
    clients: list[TestClient] = []

    def make(**options: Any) -> TestClient:
        client = TestClient(create_app(pair, DashboardOptions(**options)),
                            raise_server_exceptions=False)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def client(make_client: Client) -> TestClient:
    return make_client()
