"""What T-SQL uses of the broker: the application facade (``BrokerAPI``) plus the catalog
statements that have a T-SQL twin (ALTER and DROP of each object, routes, priorities, the
endpoint).  ``Broker`` satisfies it structurally (``Broker.execute_tsql`` passes itself, so
mypy checks it)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from sbroker.engine.api import BrokerAPI
from sbroker.services.network.config import EndpointConfig


class Network(Protocol):
    """The broker's endpoint as T-SQL reads it."""

    def endpoint(self) -> EndpointConfig | None: ...


@runtime_checkable
class TSqlBroker(BrokerAPI, Protocol):
    """The broker a T-SQL session runs on."""

    @property
    def network(self) -> Network: ...

    def alter_message_type(self, name: str, validation: object) -> None: ...

    def alter_service(self, name: str, *, queue: str | None = None,
                      add_contracts: Iterable[str] = (),
                      drop_contracts: Iterable[str] = ()) -> None: ...

    def create_route(self, name: str, service_name: str | None = None,
                     address: str = "LOCAL", broker_instance: str | None = None,
                     lifetime: float | None = None, *, exist_ok: bool = False) -> None: ...

    def create_broker_priority(self, name: str, *, contract: str = ...,
                               local_service: str = ..., remote_service: str = ...,
                               priority_level: int = 5, exist_ok: bool = False) -> None: ...

    def create_endpoint(self, host: str = "127.0.0.1", port: int = 4022, *,
                        secret: str | bytes | None = None, certificate: str | None = None,
                        private_key: str | None = None, ca: str | None = None,
                        encryption: str = "required", message_forwarding: bool = False,
                        message_forward_size: int = 10, exist_ok: bool = False,
                        **tunables: Any) -> None: ...

    def alter_endpoint(self, **options: Any) -> None: ...

    def drop_endpoint(self) -> None: ...

    def drop_message_type(self, name: str) -> None: ...

    def drop_contract(self, name: str) -> None: ...

    def drop_queue(self, name: str) -> None: ...

    def drop_service(self, name: str) -> None: ...

    def drop_route(self, name: str) -> None: ...

    def drop_broker_priority(self, name: str) -> None: ...

    def drop_event_notification(self, name: str) -> None: ...
