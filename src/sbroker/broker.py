"""``Broker``: one Service Broker database — its catalog, transactions, views and services."""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any

from sbroker.core import messages as m
from sbroker.core.clock import SYSTEM_CLOCK, Clock
from sbroker.core.errors import InvalidArgumentError, NotFoundError
from sbroker.core.priority import ANY
from sbroker.engine import catalog as cat_mod
from sbroker.engine import dialogs, events, streams
from sbroker.engine.catalog import Activation, Catalog
from sbroker.engine.hooks import EngineHooks
from sbroker.engine.notify import Notifier
from sbroker.engine.transaction import Transaction
from sbroker.services.activation import ActivationService
from sbroker.services.timers import TimerService
from sbroker.storage.sqlite.connector import (
    Database,
    parse_target,
    rows_as_dicts,
    write,
)
from sbroker.storage.sqlite.sweeper import live

SQL_VIEWS = (
    "conversation_endpoints", "conversation_groups", "transmission_queue", "service_queues",
    "services", "contracts", "message_types", "routes", "conversation_priorities",
    "dm_broker_queue_monitors", "dm_broker_activated_tasks", "queue_stats",
)
REAP_INTERVAL = 1.0
CATALOG_MAX_AGE = 0.05  # seconds a statement trusts the catalog snapshot without a check
ENDPOINT_CACHE_SIZE = 10_000
POISON_THRESHOLD = 5
_OPTIONS = ("durability", "clock", "start", "monitor_interval", "anti_replay_seconds")


class Broker:
    """An open broker database.  Use :meth:`open`; close it (or use ``with``) when done."""

    def __init__(self, db: Database, *, clock: Clock, monitor_interval: float,
                 anti_replay_seconds: float) -> None:
        self.db = db
        self.clock = clock
        self.monitor_interval = monitor_interval
        self.anti_replay = anti_replay_seconds
        self.hooks: EngineHooks = EngineHooks()
        self._catalog: Catalog | None = None
        self._catalog_checked = 0.0
        self._catalog_ddl = 0  # this process's DDL count: a check that raced one is no check
        self._catalog_lock = threading.Lock()
        self._endpoint_cache: dict[str, tuple[Any, ...]] = {}
        self._view_refreshers: dict[str, list[Any]] = {
            name: [self._reap_for_views]
            for name in ("dm_broker_queue_monitors", "dm_broker_activated_tasks", "queue_stats")
        }
        self._last_reap = 0.0
        self.notifier = Notifier(clock, db._connect)
        self.session_id = db.register_session(clock.now())
        self._timers = TimerService(self)
        self._services: list[Any] = [self._timers]
        self._started = False
        self._closed = False
        self._procedures: dict[str, Any] = {}
        self._activation = ActivationService(self)  # installs its hooks and dm_ views
        self._services.append(self._activation)
        from sbroker.services.network.service import NetworkService

        self.network = NetworkService(self)
        self._services.append(self.network)
        with db.connection() as conn:
            self.broker_instance = self._catalog_for(conn).broker_instance
            self.reap_dead_sessions(conn, force=True)

    @classmethod
    def open(cls, target: str | os.PathLike[str], **options: Any) -> Broker:
        """Open (creating if needed) a broker database: a path, ``sqlite:///path``, ``:memory:``.

        Options: ``durability`` ("normal" WAL default, or "full" to fsync each commit),
        ``clock`` (an injectable clock), ``start`` (start the background services),
        ``monitor_interval`` (seconds, default 5), ``anti_replay_seconds`` (default 1800).
        """
        unknown = sorted(set(options) - set(_OPTIONS))
        if unknown:
            raise InvalidArgumentError(
                f"unknown option {unknown[0]!r} for Broker.open: use {', '.join(_OPTIONS)}"
            )
        if str(target).startswith(("postgresql://", "postgres://")):
            raise InvalidArgumentError(
                "the PostgreSQL backend is not available yet: use a file path or sqlite:///path"
            )
        path, temporary = parse_target(target)
        interval = options.get("monitor_interval", 5.0)
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
            raise InvalidArgumentError("monitor_interval must be a number of seconds > 0")
        db = Database(path, durability=options.get("durability", "normal"), temporary=temporary)
        try:
            broker = cls(
                db, clock=options.get("clock") or SYSTEM_CLOCK, monitor_interval=float(interval),
                anti_replay_seconds=float(options.get("anti_replay_seconds", 1800)),
            )
        except BaseException:
            db.close()
            raise
        if options.get("start"):
            broker.start()
        return broker

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> Broker:
        """Start the background services (timers, lifetimes, activation, ...)."""
        if not self._started:
            self._started = True
            for service in self._services:
                service.start()
        return self

    def stop(self) -> None:
        """Stop the background services; the broker stays usable as a passive library."""
        if self._started:
            for service in reversed(self._services):
                service.stop()
            self._started = False

    def close(self) -> None:
        """Stop the services, release this process's locks and close the database."""
        if self._closed:
            return
        self.stop()
        self._closed = True
        self.notifier.close()
        try:
            with self.db.connection() as conn, write(conn):
                for table in ("sb_group_locks", "sb_activated_tasks", "sb_queue_monitors",
                              "sb_sessions"):
                    conn.execute(f"DELETE FROM {table} WHERE session_id = ?", (self.session_id,))
        except sqlite3.Error:
            pass
        self.db.close()

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def dialect(self) -> str:
        """The backend's SQL dialect ("sqlite"): applications pick their SQL files by it."""
        return "sqlite"

    @property
    def started(self) -> bool:
        return self._started

    def add_service(self, service: Any) -> None:
        """Register a background service (start/stop) that runs while the broker is started."""
        self._services.append(service)
        if self._started:
            service.start()

    # -- catalog ----------------------------------------------------------------------------
    def _catalog_for(self, conn: sqlite3.Connection, *, max_age: float = 0.0) -> Catalog:
        """The catalog snapshot; checked against the database unless checked in the last
        ``max_age`` seconds (statements pass a few ms: COMMIT verifies the version anyway)."""
        with self._catalog_lock:
            if max_age and self._catalog is not None and (
                    time.monotonic() - self._catalog_checked < max_age):
                return self._catalog
            ddl = self._catalog_ddl
        version = cat_mod.current_version(conn)
        with self._catalog_lock:
            if self._catalog is not None and self._catalog.version == version:
                if ddl == self._catalog_ddl:
                    self._catalog_checked = time.monotonic()
                return self._catalog
        fresh = cat_mod.load(conn)
        with self._catalog_lock:
            self._catalog = fresh
            if ddl == self._catalog_ddl:  # else DDL committed meanwhile: check next time
                self._catalog_checked = time.monotonic()
        return fresh

    def _remember_endpoint(self, ep: dialogs.Endpoint) -> None:
        """Keep an endpoint snapshot for statement-time checks of SEND (COMMIT re-checks)."""
        cache = self._endpoint_cache
        if len(cache) >= ENDPOINT_CACHE_SIZE:
            cache.pop(next(iter(cache)))
        cache[ep.handle] = tuple(ep.__dict__.values())  # rebuilt with Endpoint(*row)

    def _forget_endpoints(self, handles: Iterable[str]) -> None:
        for handle in handles:
            self._endpoint_cache.pop(handle, None)

    @property
    def catalog(self) -> Catalog:
        with self.db.connection() as conn:
            return self._catalog_for(conn)

    def _ddl(self, fn: Any, *args: Any, redeliver: bool = False) -> None:
        with self.db.connection() as conn:
            fn(conn, *args)
            if redeliver:
                self._redeliver(conn)
        with self._catalog_lock:
            self._catalog_checked = 0.0  # this process changed it: look again next time
            self._catalog_ddl += 1
        self.notifier.bump()  # waiting receivers re-read the catalog (a queue disabled, ...)

    def _redeliver(self, conn: sqlite3.Connection) -> None:
        if conn.execute("SELECT 1 FROM sb_transmission_queue LIMIT 1").fetchone() is None:
            return
        with write(conn):
            ctx = dialogs.Context(conn, self._catalog_for(conn), self.clock.now(), self.anti_replay)
            dialogs.redeliver_waiting(ctx)
        self._forget_endpoints(ctx.changed)
        self._after_commit(ctx.ready_queues, False, set(), False)

    def create_message_type(self, name: str, validation: object = "none") -> None:
        self._ddl(cat_mod.create_message_type, name, validation)

    def drop_message_type(self, name: str) -> None:
        self._ddl(cat_mod.drop_message_type, name)

    def create_contract(self, name: str, message_types: Mapping[str, str]) -> None:
        self._ddl(cat_mod.create_contract, name, message_types)

    def drop_contract(self, name: str) -> None:
        self._ddl(cat_mod.drop_contract, name)

    def create_queue(self, name: str, *, status: bool = True, retention: bool = False,
                     activation: Activation | None = None,
                     poison_message_handling: bool = True) -> None:
        self._ddl(cat_mod.create_queue, name, dict(
            status=status, retention=retention, activation=activation,
            poison_message_handling=poison_message_handling))
        self._remember_procedure(name, activation)
        self.hooks.altered(name)

    def alter_queue(self, name: str, **options: Any) -> None:
        self._ddl(cat_mod.alter_queue, name, options, redeliver=options.get("status") is True)
        if "activation" in options:
            self._remember_procedure(name, options["activation"])
        self.hooks.altered(name)

    def _remember_procedure(self, queue: str, activation: Activation | None) -> None:
        if activation is None:
            self._procedures.pop(queue, None)
        else:
            self._procedures[queue] = activation.procedure

    def drop_queue(self, name: str) -> None:
        self._ddl(cat_mod.drop_queue, name)
        self._procedures.pop(name, None)
        self.hooks.altered(name)

    def create_service(self, name: str, queue: str, contracts: Iterable[str] = ()) -> None:
        self._ddl(cat_mod.create_service, name, queue, contracts, redeliver=True)

    def drop_service(self, name: str) -> None:
        self._ddl(cat_mod.drop_service, name)

    def create_route(self, name: str, service_name: str | None = None, address: str = "LOCAL",
                     broker_instance: str | None = None, lifetime: float | None = None) -> None:
        expires = None if lifetime is None else self.clock.now() + float(lifetime)
        self._ddl(cat_mod.create_route, name, service_name, address, broker_instance, expires,
                  redeliver=True)

    def drop_route(self, name: str) -> None:
        self._ddl(cat_mod.drop_route, name)

    def create_endpoint(self, host: str = "127.0.0.1", port: int = 4022, *,
                        secret: str | bytes | None = None, certificate: str | None = None,
                        private_key: str | None = None, ca: str | None = None,
                        encryption: str = "required", message_forwarding: bool = False,
                        message_forward_size: int = 10, **tunables: Any) -> None:
        """The broker endpoint (SPEC §7); ``tunables``: see ``sbroker.network.config.TUNABLES``
        (fragment_size, retry_initial, retry_max, idle_timeout, starvation_seconds, ...)."""
        self.network.create_endpoint(
            host, port, secret=secret, certificate=certificate, private_key=private_key, ca=ca,
            encryption=encryption, message_forwarding=message_forwarding,
            message_forward_size=message_forward_size, **tunables)

    def alter_endpoint(self, **options: Any) -> None:
        self.network.alter_endpoint(**options)

    def drop_endpoint(self) -> None:
        self.network.drop_endpoint()

    def create_broker_priority(self, name: str, *, contract: str = ANY,
                               local_service: str = ANY, remote_service: str = ANY,
                               priority_level: int = 5) -> None:
        self._ddl(cat_mod.create_broker_priority, name, contract, local_service, remote_service,
                  priority_level)

    def drop_broker_priority(self, name: str) -> None:
        self._ddl(cat_mod.drop_broker_priority, name)

    def create_event_notification(self, name: str, queue: str, event: str,
                                  to_service: str) -> None:
        self._ddl(cat_mod.create_event_notification, name, queue, event, to_service)
        self.hooks.altered(queue)

    def drop_event_notification(self, name: str) -> None:
        self._ddl(cat_mod.drop_event_notification, name)

    @property
    def honor_broker_priority(self) -> bool:
        return self.catalog.honor_broker_priority

    @honor_broker_priority.setter
    def honor_broker_priority(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise InvalidArgumentError("honor_broker_priority must be True or False")
        self._ddl(cat_mod.set_option, "honor_broker_priority", "1" if value else "0")

    # -- statements -------------------------------------------------------------------------
    def transaction(self) -> Transaction:
        """A new broker transaction: ``with broker.transaction() as tx: ...``."""
        if self._closed:
            raise InvalidArgumentError("the broker is closed: open it again with Broker.open")
        return Transaction(self)

    def peek(self, queue: str, *, top: int | None = None, offset: int = 0) -> list[m.Message]:
        """The queue's rows in RECEIVE order, without receiving or locking anything:
        ``top`` rows at most, after skipping ``offset`` (a page of a long queue)."""
        for name, value in (("top", top), ("offset", offset)):
            if value is not None and (
                    isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise InvalidArgumentError(f"{name} must be an int >= 0, got {value!r}")
        with self.db.connection() as conn:
            q = self._catalog_for(conn).queue(queue)
            rows = conn.execute(
                "SELECT status, priority, queuing_order, group_id, handle, msn, service, contract,"
                " message_type, validation, body, message_id, enqueued_at FROM sb_messages"
                f" WHERE queue_id = ? AND {live('sb_messages')}"
                " ORDER BY priority DESC, queuing_order LIMIT ? OFFSET ?",
                (q.queue_id, -1 if top is None else top, offset),
            ).fetchall()
        return [m.Message(*row) for row in rows]

    def view(self, name: str) -> list[dict[str, Any]]:
        """A catalog or dynamic management view as a list of dicts."""
        if name in SQL_VIEWS:
            for refresh in self._view_refreshers.get(name, ()):
                refresh()
            with self.db.connection() as conn:
                return rows_as_dicts(conn.execute(f"SELECT * FROM {name}"))
        provider = self._dm_views.get(name)
        if provider is not None:
            return list(provider())
        app_view = self._app_view(name)
        if app_view is not None:
            return app_view
        raise NotFoundError(
            f"unknown view {name!r}: use one of "
            f"{', '.join([*SQL_VIEWS, *sorted(self._dm_views)])}"
        )

    def _app_view(self, name: str) -> list[dict[str, Any]] | None:
        """Application tables/views living in the same database (ExecutionLog, ...)."""
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT 1 FROM sqlite_schema WHERE type IN ('table', 'view') AND name = ?"
                " AND substr(name, 1, 3) != 'sb_' AND substr(name, 1, 7) != 'sqlite_'",
                (name,),
            ).fetchone()
            if row is None:
                return None
            return rows_as_dicts(conn.execute(f'SELECT * FROM "{name}"'))

    @property
    def _dm_views(self) -> dict[str, Any]:
        views: dict[str, Any] = {"dm_broker_connections": lambda: []}
        views.update(getattr(self, "_extra_views", {}))
        return views

    def register_view_refresher(self, name: str, refresh: Any) -> None:
        """Let a service bring a stored view up to date before it is read here."""
        self._view_refreshers.setdefault(name, []).append(refresh)

    def register_view(self, name: str, provider: Any) -> None:
        """Let a service provide a dynamic view (a callable returning a list of dicts)."""
        extra: dict[str, Any] = self.__dict__.setdefault("_extra_views", {})
        extra[name] = provider

    # -- the task scheduler (SPEC §8) -------------------------------------------------------
    def install_executor(self, *, max_queue_readers: int = 4, spark: Any = None,
                         runner: Any = None) -> None:
        """Create, idempotently, the seed 002 objects and the executor (activated procedure).

        ``spark``: a ``sbroker.SparkConfig`` (local mode by default); ``runner``: run tasks with
        this Runner instead (tests use a StubRunner).
        """
        from sbroker.apps.scheduler import schema
        from sbroker.apps.scheduler.client import install_runner

        if isinstance(max_queue_readers, bool) or not isinstance(max_queue_readers, int) or (
                max_queue_readers < 1):
            raise InvalidArgumentError("max_queue_readers must be an int >= 1")
        schema.install(self, max_queue_readers=max_queue_readers, spark=spark)
        if runner is not None:
            install_runner(self, runner)

    def scheduler(self, name: str | None = None, *, max_concurrency: int | None = None,
                  priority: int | None = None) -> Any:
        """A task scheduler (one dialog to the executor): ``with broker.scheduler() as s:``."""
        from sbroker.apps.scheduler import Scheduler

        return Scheduler(self, name, max_concurrency=max_concurrency, priority=priority)

    def _ready_groups(self, queue: str) -> list[tuple[str, int, int, str]]:
        """Unlocked groups with ready messages: (group, priority, oldest order, conversation)."""
        with self.db.connection() as conn:
            q = self._catalog_for(conn).queue(queue)
            rows = conn.execute(
                "SELECT m.group_id, max(m.priority), min(m.queuing_order),"
                " min(e.conversation_id) FROM sb_messages m"
                " JOIN sb_endpoints e ON e.handle = m.handle"
                " LEFT JOIN sb_group_locks l ON l.group_id = m.group_id"
                f" WHERE m.queue_id = ? AND m.status = 1 AND {live('m')} AND l.group_id IS NULL"
                " GROUP BY m.group_id",
                (q.queue_id,),
            ).fetchall()
        return [(str(g), int(p), int(o), str(c)) for g, p, o, c in rows]

    def _reap_for_views(self) -> None:
        """Views of processes' rows show live processes only."""
        with self.db.connection() as conn:
            self.reap_dead_sessions(conn, force=True)

    # -- engine callbacks -------------------------------------------------------------------
    def reap_dead_sessions(self, conn: sqlite3.Connection, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_reap < REAP_INTERVAL:
            return
        self._last_reap = now
        if self.db.reap_dead_sessions(conn, self.session_id):
            self.notifier.bump()

    def _after_commit(self, ready_queues: set[int], released: set[int] | bool,
                      received: set[int], wake_services: bool) -> None:
        if ready_queues or released:
            changed = None if released is True else ready_queues | (released or set())
            self.notifier.bump(changed)
        if ready_queues:
            self.hooks.arrived(ready_queues)
        if wake_services and self._started:
            self._timers.wake()

    def _count_rollbacks(self, conn: sqlite3.Connection, queue_ids: set[int]) -> list[int]:
        """Count a rolled-back RECEIVE per queue; disable poisoned queues.  Returns those."""
        disabled = []
        for qid in sorted(queue_ids):
            conn.execute(
                "UPDATE sb_queues SET rollback_count = rollback_count + 1 WHERE queue_id = ?",
                (qid,),
            )
            count, poison, status = conn.execute(
                "SELECT rollback_count, poison_message_handling, status FROM sb_queues"
                " WHERE queue_id = ?", (qid,),
            ).fetchone()
            if poison and status and count >= POISON_THRESHOLD:
                conn.execute("UPDATE sb_queues SET status = 0 WHERE queue_id = ?", (qid,))
                conn.execute(
                    "UPDATE sb_meta SET value = CAST(value AS INTEGER) + 1"
                    " WHERE key = 'catalog_version'"
                )
                disabled.append(qid)
        return disabled

    def _after_rollback(self, received: set[int], released: set[int] | bool,
                        disabled: list[int]) -> None:
        if released:
            self.notifier.bump(None if released is True else released)
        if received:
            self.hooks.rolled_back(received)
        for qid in disabled:
            self._queue_disabled(qid)

    def _queue_disabled(self, queue_id: int) -> None:
        """A queue was disabled by poison-message detection (event notifications hook here)."""
        cat = self.catalog
        queue = cat.queues_by_id.get(queue_id)
        if queue is not None:
            self.hooks.altered(queue.name)
            try:
                events.post_event(self, queue.name, events.BROKER_QUEUE_DISABLED)
            except Exception:  # the rollback already happened: report, do not raise
                logging.getLogger("sbroker.events").exception(
                    "BROKER_QUEUE_DISABLED notification failed", extra={"queue": queue.name})


streams.set_opener(Broker.open)  # Spark's workers open a broker by URL (engine/streams.py)
