"""The engine of one open broker database: the store, the catalog, transactions, and what
they tell the services.  ``Broker`` (the composition root) builds one and puts the services
and the public facade around it; services get it through the narrow protocols of
:mod:`sbroker.engine.api`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from sbroker.core import messages as m
from sbroker.core.catalog import Catalog
from sbroker.core.clock import Clock
from sbroker.core.errors import BrokerError, InvalidArgumentError
from sbroker.engine import due, events
from sbroker.engine.abandon import Abandoned
from sbroker.engine.catalog import CatalogCache
from sbroker.engine.endpoints import Context, Endpoint
from sbroker.engine.listeners import Listeners
from sbroker.engine.notify import Notifier
from sbroker.engine.transaction import Transaction
from sbroker.engine.views import Views
from sbroker.storage.ports import Connection, Store

log = logging.getLogger("sbroker.engine")
T = TypeVar("T")
ENDPOINT_CACHE_SIZE = 10_000
POISON_THRESHOLD = 5
CATALOG_MAX_AGE = 0.05  # seconds a statement trusts the catalog snapshot without a check


class Engine:
    """Everything a broker transaction and the services need, for one open database."""

    def __init__(self, store: Store, *, clock: Clock, anti_replay: float) -> None:
        self.store = store
        self.clock = clock
        self.anti_replay = anti_replay
        self.listeners = Listeners()
        self.catalogs = CatalogCache(clock)
        self.views = Views(store)
        self.views.before_read(["dm_broker_queue_monitors", "dm_broker_activated_tasks",
                                "dm_broker_sessions", "dm_broker_streams", "queue_stats"],
                               lambda: self.reap(force=True))  # live processes' rows only
        self.notifier = Notifier(clock, store.feed)
        self.procedures: dict[str, Callable[..., Any] | str] = {}
        self.closed = False
        # Endpoint snapshots (their fields) for statement-time checks of SEND: COMMIT re-checks.
        self.endpoint_cache: dict[str, tuple[Any, ...]] = {}
        self.session_id = store.liveness.register(clock.now())
        self.on_timers: Callable[[], None] = lambda: None  # the timer service's wake-up
        self.abandoned = Abandoned(self)
        with store.read() as conn:
            self.broker_instance = self.catalog(conn).broker_instance
        self.reap(force=True)

    # -- catalog -------------------------------------------------------------------------------
    def catalog(self, conn: Connection | None = None, *, max_age: float = 0.0) -> Catalog:
        """The catalog snapshot, checked against the database unless checked in the last
        ``max_age`` seconds."""
        if conn is None:
            with self.store.read() as own:
                return self.catalogs.get(own, max_age=max_age)
        return self.catalogs.get(conn, max_age=max_age)

    @property
    def current_catalog(self) -> Catalog | None:
        """The last snapshot, without a database look (hooks may not touch the database)."""
        return self.catalogs.current

    def ddl(self, fn: Callable[[Connection], None], *, redeliver: bool = False) -> None:
        """Run a DDL statement; messages waiting for what it created go on if asked."""
        self.store.commit_path.run(fn)
        self.catalogs.changed_here()
        if redeliver:
            self.redeliver()
        self.notifier.bump()  # waiting receivers re-read the catalog (a queue disabled, ...)

    def redeliver(self) -> None:
        """Deliver messages that wait in the transmission queue for a local service."""
        with self.store.read() as conn:
            if conn.query_one(conn.sql.any_transmission) is None:
                return

        def run(conn: Connection) -> Context:
            ctx = self.context(conn)
            due.redeliver_waiting(ctx)
            return ctx

        ctx = self.store.commit_path.run(run)
        self.forget_endpoints(ctx.changed)
        self.after_commit(ctx.ready_queues, False, False)

    def context(self, conn: Connection, *, max_age: float = 0.0) -> Context:
        """What commit-time code needs, for a write transaction on ``conn``."""
        return Context(conn, self.catalog(conn, max_age=max_age), self.clock.now(),
                       self.anti_replay)

    # -- endpoint snapshots for statement-time checks of SEND (COMMIT re-checks) ----------------
    def remember_endpoint(self, ep: Endpoint) -> None:
        cache = self.endpoint_cache
        if len(cache) >= ENDPOINT_CACHE_SIZE:
            cache.pop(next(iter(cache)))
        cache[ep.handle] = ep.as_row()  # rebuilt with Endpoint(*row)

    def forget_endpoints(self, handles: Iterable[str]) -> None:
        for handle in handles:
            self.endpoint_cache.pop(handle, None)
            self.store.sends.forget(handle)

    # -- after a commit or a rollback ---------------------------------------------------------
    def after_commit(self, ready_queues: set[int], released: set[int] | bool,
                     wake_timers: bool, *, transmitted: bool = False) -> None:
        if ready_queues or released:
            changed = None if released is True else ready_queues | (released or set())
            self.notifier.bump(changed)
        if ready_queues:
            self.listeners.arrived(ready_queues)
        if wake_timers:
            self.on_timers()
        if transmitted:
            self.listeners.transmitted()

    def count_rollbacks(self, conn: Connection, queue_ids: Iterable[int]) -> list[int]:
        """Count a rolled-back RECEIVE per queue; disable poisoned queues.  Returns those."""
        disabled = []
        for qid in sorted(queue_ids):
            row = conn.query_one(conn.sql.count_rollback, (qid,))
            if row is None:
                continue  # the queue was dropped
            count, poison, status = row
            if poison and status and count >= POISON_THRESHOLD:
                conn.execute(conn.sql.disable_queue, (qid,))
                conn.execute(conn.sql.bump_catalog_version)
                disabled.append(qid)
        return disabled

    def after_rollback(self, received: set[int], released: set[int] | bool,
                       disabled: list[int]) -> None:
        if released:
            self.notifier.bump(None if released is True else released)
        if received:
            self.listeners.rolled_back(received)
        for qid in disabled:
            self.queue_disabled(qid)

    def queue_disabled(self, queue_id: int) -> None:
        """A queue was disabled by poison-message detection: tell the listeners, and post
        BROKER_QUEUE_DISABLED."""
        self.catalogs.changed_here()
        queue = self.catalog().queues_by_id.get(queue_id)
        if queue is None:
            return
        self.listeners.altered(queue.name)
        try:
            events.post_event(self, queue.name, events.BROKER_QUEUE_DISABLED)
        except Exception:  # the rollback already happened: report, do not raise
            log.exception("BROKER_QUEUE_DISABLED notification failed",
                          extra={"queue": queue.name})

    # -- sessions ------------------------------------------------------------------------------
    def reap(self, *, force: bool = False) -> None:
        """Drop what dead processes held (their group locks, their activation rows)."""
        self.store.reap(self.session_id, force=force)

    # -- reads -----------------------------------------------------------------------------------
    def peek(self, queue: str, *, top: int | None = None, offset: int = 0) -> list[m.Message]:
        for name, value in (("top", top), ("offset", offset)):
            if value is not None and (
                    isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise InvalidArgumentError(f"{name} must be an int >= 0, got {value!r}")
        with self.store.read() as conn:
            q = self.catalogs.get(conn).queue(queue)
            rows = conn.query_all(conn.sql.peek,
                                  (q.queue_id, -1 if top is None else top, offset))
        return [m.message_from_row(row) for row in rows]

    def transaction(self) -> Transaction:
        """A new broker transaction."""
        if self.closed:
            raise InvalidArgumentError("the broker is closed: open it again with Broker.open")
        return Transaction(self)

    def close(self) -> None:
        """Release this process's session (its locks and rows go with it) and the store."""
        if self.closed:
            return
        self.closed = True
        self.notifier.close()
        self.abandoned.close()
        try:
            self.store.drop_sessions([self.session_id])
        except BrokerError:
            pass
        except Exception:
            log.debug("could not drop this session's rows", exc_info=True)
        self.store.close()
