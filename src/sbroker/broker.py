"""``Broker``: the composition root.  ``Broker.open`` wires a storage backend, the engine and
the background services together; the methods are a thin facade over them (docs/concepts.md)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from sbroker.apps.tracing import from_environment
from sbroker.core import messages as m
from sbroker.core.catalog import Activation, Catalog
from sbroker.core.clock import SYSTEM_CLOCK, Clock
from sbroker.core.errors import DatabaseError, InvalidArgumentError
from sbroker.core.instrumentation import NO_INSTRUMENTATION, Instrumentation
from sbroker.core.priority import ANY
from sbroker.engine import catalog as ddl
from sbroker.engine import definitions, streams
from sbroker.engine.engine import Engine
from sbroker.engine.listeners import Listeners
from sbroker.engine.transaction import Transaction
from sbroker.services.activation import ActivationService
from sbroker.services.network.service import NetworkService
from sbroker.services.timers import TimerService
from sbroker.storage.ports import Connection, Store
from sbroker.storage.sqlite.connector import parse_target
from sbroker.storage.sqlite.store import SqliteStore

_OPTIONS = ("durability", "clock", "start", "monitor_interval", "anti_replay_seconds", "create",
            "instrumentation")


def _check_path(path: Path, *, create: bool) -> None:
    """One-line errors for a folder given as the database, and a missing file (create=False)."""
    if path.is_dir():
        raise DatabaseError(f"{path} is a folder, not a broker database file: give a file"
                            f" path such as {path / 'sbroker.db'}")
    if not create and not path.exists():
        raise DatabaseError(f"no broker database at {path} (create=False): create it with"
                            " Broker.open(path) or `sbroker --db PATH init`")


def open_store(target: str | os.PathLike[str], *, durability: str, create: bool = True
               ) -> Store:
    """The storage backend for ``target``: a SQLite file (path, ``sqlite:///``, ``:memory:``)
    or a PostgreSQL database (``postgresql://`` or ``postgres://``).  ``create=False``
    refuses a database that does not exist yet."""
    if str(target).startswith(("postgresql://", "postgres://")):
        try:
            from sbroker.storage.postgres.store import PgStore
        except ImportError:
            raise InvalidArgumentError(
                "the PostgreSQL backend needs psycopg and psycopg_pool: pip install"
                " 'sbroker[postgres]'") from None
        return PgStore(str(target), durability=durability, create=create)
    path, temporary = parse_target(target)
    if not temporary:
        _check_path(path, create=create)
    return SqliteStore(target, durability=durability)


def _scheduler_view(name: str) -> Any:
    """The scheduler's view ``name`` read with its own statement for the connection's
    dialect."""
    from sbroker.storage.queries import load

    def statement(conn: Any) -> str:
        return load("sbroker.apps.scheduler", f"{conn.dialect}.sql")[f"view_{name}"]

    return statement


class Broker:
    """An open broker database.  Use :meth:`open`; close it (or use ``with``) when done."""

    def __init__(self, store: Store, *, clock: Clock, monitor_interval: float,
                 anti_replay_seconds: float,
                 instrumentation: Instrumentation = NO_INSTRUMENTATION) -> None:
        self.store = store
        self.clock = clock
        self.monitor_interval = monitor_interval
        self.engine = Engine(store, clock=clock, anti_replay=anti_replay_seconds,
                             instrumentation=instrumentation)
        self._timers = TimerService(self.engine)
        self._activation = ActivationService(self.engine, self, monitor_interval)
        self.network = NetworkService(self.engine)
        self._services: list[Any] = [self._timers, self._activation, self.network]
        self.engine.on_timers = self._wake_timers
        self._started = False
        self._executor: Any = None  # the scheduler's executor state (apps/scheduler)
        for view in ("ExecutionLog", "ExecutionStatus"):
            self.engine.views.add_statement(view, _scheduler_view(view))

    @classmethod
    def open(cls, target: str | os.PathLike[str], **options: Any) -> Broker:
        """Open (creating if needed) a broker database: a path, ``sqlite:///path``, ``:memory:``.

        Options: ``durability`` ("normal" WAL default, or "full" to fsync each commit),
        ``clock`` (an injectable clock), ``start`` (start the background services),
        ``monitor_interval`` (seconds, default 5), ``anti_replay_seconds`` (default 1800),
        ``create`` (default True; False refuses a database that does not exist yet),
        ``instrumentation`` (the hooks tracing and metrics watch the broker by: by default
        OpenTelemetry's when the application set a tracer provider, else none; see
        docs/tracing.md).
        """
        unknown = sorted(set(options) - set(_OPTIONS))
        if unknown:
            raise InvalidArgumentError(
                f"unknown option {unknown[0]!r} for Broker.open: use {', '.join(_OPTIONS)}"
            )
        interval = options.get("monitor_interval", 5.0)
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
            raise InvalidArgumentError("monitor_interval must be a number of seconds > 0")
        instrumentation = options.get("instrumentation") or from_environment()
        if not isinstance(instrumentation, Instrumentation):
            raise InvalidArgumentError(
                "instrumentation must be an sbroker.Instrumentation (its hooks), got "
                f"{type(instrumentation).__name__}")
        store = open_store(target, durability=options.get("durability", "normal"),
                           create=bool(options.get("create", True)))
        try:
            broker = cls(
                store, clock=options.get("clock") or SYSTEM_CLOCK,
                monitor_interval=float(interval),
                anti_replay_seconds=float(options.get("anti_replay_seconds", 1800)),
                instrumentation=instrumentation,
            )
        except BaseException:
            store.close()
            raise
        if options.get("start"):
            broker.start()
        return broker

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> Broker:
        """Start the background services (timers, lifetimes, activation, network)."""
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
        if self.engine.closed:
            return
        self.stop()
        if self._executor is not None:
            self._executor.close()
        self.engine.close()

    def __enter__(self) -> Broker:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def started(self) -> bool:
        return self._started

    @property
    def instrumentation(self) -> Instrumentation:
        """The hooks tracing and metrics watch this broker by (docs/tracing.md)."""
        return self.engine.instrumentation

    @property
    def activation(self) -> ActivationService:
        """The activation service (queue monitors, activated procedures)."""
        return self._activation

    @property
    def closed(self) -> bool:
        return self.engine.closed

    def add_service(self, service: Any) -> None:
        """Register a background service (start/stop) that runs while the broker is started."""
        self._services.append(service)
        if self._started:
            service.start()

    def _wake_timers(self) -> None:
        if self._started:
            self._timers.wake()

    # -- what the engine knows ---------------------------------------------------------------
    @property
    def dialect(self) -> str:
        """The backend's SQL dialect ("sqlite"): applications pick their SQL files by it."""
        return self.store.dialect

    @property
    def db(self) -> Store:
        """The storage backend (for tools and tests; applications use the statements)."""
        return self.store

    @property
    def session_id(self) -> int:
        return self.engine.session_id

    @property
    def broker_instance(self) -> str:
        return self.engine.broker_instance

    @property
    def hooks(self) -> Listeners:
        """What the engine tells services (add a listener with ``hooks.add``)."""
        return self.engine.listeners

    @property
    def notifier(self) -> Any:
        return self.engine.notifier

    @property
    def catalog(self) -> Catalog:
        return self.engine.catalog()

    @property
    def anti_replay(self) -> float:
        return self.engine.anti_replay

    # -- catalog DDL (docs/concepts.md, "Catalog objects") ----------------------------------
    def _create(self, exist_ok: bool, kind: str, name: str, args: Mapping[str, Any],
                fn: Callable[[Connection], None], *, redeliver: bool = False) -> bool:
        """Run a create DDL; with ``exist_ok`` the same definition again is a no-op and a
        different one a DuplicateError saying what differs (``definitions``).  True when it
        created."""
        def same() -> bool:
            with self.store.read() as conn:
                return definitions.same(conn, self.engine.catalog(conn), kind, name, args)

        return definitions.create_once(
            exist_ok, same, lambda: self.engine.ddl(fn, redeliver=redeliver))

    def create_message_type(self, name: str, validation: object = "none", *,
                            exist_ok: bool = False) -> None:
        self._create(exist_ok, "message type", name, {"validation": validation},
                     ddl.create_message_type(name, validation))

    def drop_message_type(self, name: str) -> None:
        self.engine.ddl(ddl.drop_message_type(name))

    def alter_message_type(self, name: str, validation: object) -> None:
        """Change a message type's validation (for messages enqueued from now on)."""
        self.engine.ddl(ddl.alter_message_type(name, validation))

    def create_contract(self, name: str, message_types: Mapping[str, str], *,
                        exist_ok: bool = False) -> None:
        self._create(exist_ok, "contract", name, {"message_types": message_types},
                     ddl.create_contract(name, message_types))

    def drop_contract(self, name: str) -> None:
        self.engine.ddl(ddl.drop_contract(name))

    def create_queue(self, name: str, *, status: bool = True, retention: bool = False,
                     activation: Activation | None = None,
                     poison_message_handling: bool = True, exist_ok: bool = False) -> None:
        options = dict(status=status, retention=retention, activation=activation,
                       poison_message_handling=poison_message_handling)
        created = self._create(exist_ok, "queue", name, options, ddl.create_queue(name, options))
        self._remember_procedure(name, activation)  # a callable is known per process
        if created:
            self.engine.listeners.altered(name)

    def alter_queue(self, name: str, **options: Any) -> None:
        self.engine.ddl(ddl.alter_queue(name, options), redeliver=options.get("status") is True)
        if "activation" in options:
            self._remember_procedure(name, options["activation"])
        self.engine.listeners.altered(name)

    def _remember_procedure(self, queue: str, activation: Activation | None) -> None:
        if activation is None:
            self.engine.procedures.pop(queue, None)
        else:
            self.engine.procedures[queue] = activation.procedure

    def drop_queue(self, name: str) -> None:
        self.engine.ddl(ddl.drop_queue(name))
        self.engine.procedures.pop(name, None)
        self.engine.listeners.altered(name)

    def create_service(self, name: str, queue: str, contracts: Iterable[str] = (), *,
                       exist_ok: bool = False) -> None:
        contracts = tuple(contracts) if not isinstance(contracts, str) else (contracts,)
        self._create(exist_ok, "service", name, {"queue": queue, "contracts": contracts},
                     ddl.create_service(name, queue, contracts), redeliver=True)

    def drop_service(self, name: str) -> None:
        self.engine.ddl(ddl.drop_service(name))

    def alter_service(self, name: str, *, queue: str | None = None,
                      add_contracts: Iterable[str] = (),
                      drop_contracts: Iterable[str] = ()) -> None:
        """Move a service without conversations to ``queue``; add or drop the contracts it
        accepts as a target (conversations already begun go on)."""
        self.engine.ddl(ddl.alter_service(name, queue, add_contracts, drop_contracts),
                        redeliver=bool(add_contracts) or queue is not None)

    def create_route(self, name: str, service_name: str | None = None, address: str = "LOCAL",
                     broker_instance: str | None = None, lifetime: float | None = None, *,
                     exist_ok: bool = False) -> None:
        expires = None if lifetime is None else self.clock.now() + float(lifetime)
        args = {"service_name": service_name, "address": address,
                "broker_instance": broker_instance, "lifetime": lifetime}
        self._create(exist_ok, "route", name, args,
                     ddl.create_route(name, service_name, address, broker_instance, expires),
                     redeliver=True)

    def drop_route(self, name: str) -> None:
        self.engine.ddl(ddl.drop_route(name))

    def create_endpoint(self, host: str = "127.0.0.1", port: int = 4022, *,
                        secret: str | bytes | None = None, certificate: str | None = None,
                        private_key: str | None = None, ca: str | None = None,
                        encryption: str = "required", message_forwarding: bool = False,
                        message_forward_size: int = 10, exist_ok: bool = False,
                        **tunables: Any) -> None:
        """The broker endpoint (docs/network.md); ``tunables``: see
        ``sbroker.services.network.config.TUNABLES`` (fragment_size, retry_initial,
        retry_max, idle_timeout, starvation_seconds, ...)."""
        self.network.create_endpoint(
            host, port, secret=secret, certificate=certificate, private_key=private_key, ca=ca,
            encryption=encryption, message_forwarding=message_forwarding,
            message_forward_size=message_forward_size, exist_ok=exist_ok, **tunables)

    def alter_endpoint(self, **options: Any) -> None:
        self.network.alter_endpoint(**options)

    def drop_endpoint(self) -> None:
        self.network.drop_endpoint()

    def create_broker_priority(self, name: str, *, contract: str = ANY,
                               local_service: str = ANY, remote_service: str = ANY,
                               priority_level: int = 5, exist_ok: bool = False) -> None:
        args = {"contract": contract, "local_service": local_service,
                "remote_service": remote_service, "priority_level": priority_level}
        self._create(exist_ok, "broker priority", name, args, ddl.create_broker_priority(
            name, contract, local_service, remote_service, priority_level))

    def drop_broker_priority(self, name: str) -> None:
        self.engine.ddl(ddl.drop_broker_priority(name))

    def create_event_notification(self, name: str, queue: str, event: str,
                                  to_service: str, *, exist_ok: bool = False) -> None:
        args = {"queue": queue, "event": event, "to_service": to_service}
        if self._create(exist_ok, "event notification", name, args,
                        ddl.create_event_notification(name, queue, event, to_service)):
            self.engine.listeners.altered(queue)

    def drop_event_notification(self, name: str) -> None:
        self.engine.ddl(ddl.drop_event_notification(name))

    @property
    def honor_broker_priority(self) -> bool:
        return self.catalog.honor_broker_priority

    @honor_broker_priority.setter
    def honor_broker_priority(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise InvalidArgumentError("honor_broker_priority must be True or False")
        self.engine.ddl(ddl.set_option("honor_broker_priority", "1" if value else "0"))

    # -- statements and views ------------------------------------------------------------------
    def transaction(self) -> Transaction:
        """A new broker transaction: ``with broker.transaction() as tx: ...``."""
        tx: Transaction = self.engine.transaction()
        return tx

    def peek(self, queue: str, *, top: int | None = None, offset: int = 0) -> list[m.Message]:
        """The queue's rows in RECEIVE order, without receiving or locking anything:
        ``top`` rows at most, after skipping ``offset`` (a page of a long queue)."""
        return self.engine.peek(queue, top=top, offset=offset)

    def queue_metrics(self) -> list[dict[str, Any]]:
        """Per queue: messages ``ready``, ``locked`` (in a group a transaction holds),
        ``incomplete`` (still being reassembled) and ``retained``."""
        with self.store.read() as conn:
            return [{"queue": name, "ready": ready, "locked": locked,
                     "incomplete": incomplete, "retained": retained}
                    for name, ready, locked, incomplete, retained
                    in conn.query_all(conn.sql.queue_metrics)]

    def view(self, name: str) -> list[dict[str, Any]]:
        """A catalog or dynamic management view as a list of dicts."""
        return self.engine.views.read(name)

    def execute_tsql(self, text: str, **options: Any) -> list[list[dict[str, Any]]]:
        """Run a T-SQL script (docs/tsql.md); its result sets.  ``options``: ``out`` (where PRINT
        goes), ``variables`` (sqlcmd's ``$(NAME)``)."""
        from sbroker.apps.tsql import execute_tsql

        return execute_tsql(self, text, **options)

    # -- the task scheduler (docs/scheduler.md) ---------------------------------------------
    def install_executor(self, *, max_queue_readers: int = 4, spark: Any = None,
                         runner: Any = None) -> None:
        """Create, idempotently, the seed 002 objects and the executor (activated procedure).

        ``spark``: a ``sbroker.SparkConfig`` (local mode by default); ``runner``: run tasks with
        this Runner instead (tests use a StubRunner).
        """
        from sbroker.apps.scheduler import schema

        if isinstance(max_queue_readers, bool) or not isinstance(max_queue_readers, int) or (
                max_queue_readers < 1):
            raise InvalidArgumentError("max_queue_readers must be an int >= 1")
        schema.install(self, max_queue_readers=max_queue_readers, spark=spark, runner=runner)

    def executor_state(self, *, create: bool = True) -> Any:
        """The state of this process's executor (its runner, what its readers run), which
        the broker owns: created on first use with a SparkRunner on the stored settings."""
        if self._executor is None and create:
            from sbroker.apps.scheduler.executor import ExecutorState, default_runner

            self._executor = ExecutorState(default_runner(self))
        return self._executor

    def use_executor_runner(self, runner: Any) -> None:
        """Run this process's executor tasks with ``runner`` (tests use a StubRunner)."""
        from sbroker.apps.scheduler.executor import ExecutorState

        self._executor = ExecutorState(runner)

    def scheduler(self, name: str | None = None, *, max_concurrency: int | None = None,
                  priority: int | None = None) -> Any:
        """A task scheduler (one dialog to the executor): ``with broker.scheduler() as s:``."""
        from sbroker.apps.scheduler import Scheduler

        return Scheduler(self, name, max_concurrency=max_concurrency, priority=priority)


streams.set_opener(Broker.open)  # Spark's workers open a broker by URL (engine/streams.py)
