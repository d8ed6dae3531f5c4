"""What a broker transaction uses of its engine, as a protocol: the transaction, RECEIVE's
wait and COMMIT's work depend on this, not on :class:`~sbroker.engine.engine.Engine`, so the
engine can build transactions without an import running back up to it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from sbroker.core.catalog import Catalog
from sbroker.core.clock import Clock
from sbroker.core.instrumentation import Instrumentation
from sbroker.engine.abandon import Abandoned
from sbroker.engine.catalog import CatalogCache
from sbroker.engine.endpoints import Endpoint
from sbroker.engine.listeners import Listeners
from sbroker.engine.notify import Notifier
from sbroker.storage.ports import Connection, Store


class Host(Protocol):
    """The engine as its transactions see it (``Engine`` satisfies it)."""

    store: Store
    clock: Clock
    anti_replay: float
    session_id: int
    closed: bool
    catalogs: CatalogCache
    listeners: Listeners
    notifier: Notifier
    abandoned: Abandoned
    endpoint_cache: dict[str, tuple[Any, ...]]
    instrumentation: Instrumentation

    def catalog(self, conn: Connection | None = None, *, max_age: float = 0.0) -> Catalog: ...

    def remember_endpoint(self, ep: Endpoint) -> None: ...

    def forget_endpoints(self, handles: Iterable[str]) -> None: ...

    def after_commit(self, ready_queues: set[int], released: set[int] | bool,
                     wake_timers: bool, *, transmitted: bool = False) -> None: ...

    def count_rollbacks(self, conn: Connection, queue_ids: Iterable[int]) -> list[int]: ...

    def after_rollback(self, received: set[int], released: set[int] | bool,
                       disabled: list[int]) -> None: ...
