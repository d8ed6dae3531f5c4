"""Helpers of the dashboard tests: the CSRF cookie, form POSTs, sending messages."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

import sbroker


def csrf(client: TestClient) -> str:
    """The browser's CSRF token (its cookie, set by the first page it loads)."""
    if "sbroker_csrf" not in client.cookies:
        client.get("/")
    return str(client.cookies["sbroker_csrf"])


def post(client: TestClient, path: str, data: dict[str, Any] | None = None,
         **kwargs: Any) -> Any:
    """A form POST as the dashboard's own pages send it."""
    return client.post(path, data={"csrf": csrf(client), **(data or {})},
                       follow_redirects=False, **kwargs)


def send(broker: sbroker.Broker, count: int = 1, body: str = "hello") -> str:
    with broker.transaction() as tx:
        handle = tx.begin_dialog("InitService", "TargetService")
        for _ in range(count):
            tx.send(handle, body=body)
    return handle
