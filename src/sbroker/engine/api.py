"""The narrow interfaces that services and applications are given instead of ``Broker``.

:class:`EngineAPI` is what a background service (timers, activation, the network) may use of
the engine; :class:`BrokerAPI` is the public facade an application (the scheduler, poison
handling, the dashboard, the Spark data source) and an activated procedure get.  ``Engine``
and ``Broker`` satisfy them structurally; nothing below the composition root imports
``Broker``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from sbroker.core import messages as m
from sbroker.core.catalog import Activation, Catalog
from sbroker.core.clock import Clock
from sbroker.core.instrumentation import Instrumentation
from sbroker.engine.endpoints import Context, Endpoint
from sbroker.engine.listeners import Listeners
from sbroker.engine.notify import Notifier
from sbroker.engine.transaction import Transaction
from sbroker.engine.views import Views
from sbroker.storage.ports import Connection, Store


class EngineAPI(Protocol):
    """What services use: the clock, the store, the catalog, applying changes, listening,
    views."""

    clock: Clock
    store: Store
    anti_replay: float
    session_id: int
    broker_instance: str
    listeners: Listeners
    views: Views
    notifier: Notifier
    procedures: dict[str, Callable[..., Any] | str]
    closed: bool
    instrumentation: Instrumentation

    def catalog(self, conn: Connection | None = None, *, max_age: float = 0.0) -> Catalog: ...

    @property
    def current_catalog(self) -> Catalog | None: ...

    def context(self, conn: Connection, *, max_age: float = 0.0) -> Context: ...

    def ddl(self, fn: Callable[[Connection], None], *, redeliver: bool = False) -> None: ...

    def after_commit(self, ready_queues: set[int], released: set[int] | bool,
                     wake_timers: bool, *, transmitted: bool = False) -> None: ...

    def forget_endpoints(self, handles: Iterable[str]) -> None: ...

    def remember_endpoint(self, ep: Endpoint) -> None: ...

    def reap(self, *, force: bool = False) -> None: ...

    def transaction(self) -> Transaction: ...


class BrokerAPI(Protocol):
    """The public facade (docs/concepts.md) as applications use it."""

    clock: Clock
    monitor_interval: float

    @property
    def dialect(self) -> str: ...

    @property
    def session_id(self) -> int: ...

    @property
    def broker_instance(self) -> str: ...

    @property
    def catalog(self) -> Catalog: ...

    @property
    def started(self) -> bool: ...

    @property
    def instrumentation(self) -> Instrumentation:
        """The hooks tracing and metrics watch this broker by (docs/tracing.md)."""
        ...

    def start(self) -> Any: ...

    def stop(self) -> None: ...

    def transaction(self) -> Transaction: ...

    def view(self, name: str) -> list[dict[str, Any]]: ...

    def peek(self, queue: str, *, top: int | None = None,
             offset: int = 0) -> list[m.Message]: ...

    def create_message_type(self, name: str, validation: object = "none") -> None: ...

    def create_contract(self, name: str, message_types: Mapping[str, str]) -> None: ...

    def create_queue(self, name: str, *, status: bool = True, retention: bool = False,
                     activation: Activation | None = None,
                     poison_message_handling: bool = True) -> None: ...

    def alter_queue(self, name: str, **options: Any) -> None: ...

    def create_event_notification(self, name: str, queue: str, event: str,
                                  to_service: str) -> None: ...

    def create_service(self, name: str, queue: str, contracts: Iterable[str] = ()) -> None: ...

    def add_service(self, service: Any) -> None: ...

    def executor_state(self, *, create: bool = True) -> Any: ...

    def use_executor_runner(self, runner: Any) -> None: ...
