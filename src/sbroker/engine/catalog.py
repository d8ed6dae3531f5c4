"""Catalog objects (message types, contracts, queues, services, routes, priorities, event
notifications): their DDL, and an in-memory snapshot reloaded when another writer changes it."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sbroker.core import messages as m
from sbroker.core.errors import DuplicateError, InvalidArgumentError, NotFoundError
from sbroker.core.priority import ANY, BrokerPriority
from sbroker.core.validation import code_for, make_validator, normalize
from sbroker.storage.sqlite.connector import write

SENT_BY = ("initiator", "target", "any")
EVENTS = ("QUEUE_ACTIVATION", "BROKER_QUEUE_DISABLED")
BUILTIN_MESSAGE_TYPES = frozenset({m.DEFAULT, *m.SYSTEM_MESSAGE_TYPES, m.EVENT_NOTIFICATION})
BUILTIN_CONTRACTS = frozenset({m.DEFAULT, m.POST_EVENT_NOTIFICATION})


@dataclass(frozen=True)
class Activation:
    """Internal activation of a queue: ``procedure`` is a callable or ``"package.module:func"``."""

    procedure: Callable[..., Any] | str
    max_queue_readers: int = 1
    status: bool = True
    execute_as: str | None = None

    def __post_init__(self) -> None:
        if not callable(self.procedure) and not (
            isinstance(self.procedure, str) and ":" in self.procedure
        ):
            raise InvalidArgumentError(
                "Activation.procedure must be a callable or an import path 'package.module:func'"
            )
        if not isinstance(self.max_queue_readers, int) or not 0 <= self.max_queue_readers <= 32767:
            raise InvalidArgumentError("max_queue_readers must be an int from 0 to 32767")

    @property
    def procedure_name(self) -> str:
        if isinstance(self.procedure, str):
            return self.procedure
        mod = getattr(self.procedure, "__module__", "?")
        return f"{mod}:{getattr(self.procedure, '__qualname__', repr(self.procedure))}"


@dataclass(frozen=True)
class MessageType:
    name: str
    kind: str
    validation_code: str
    check: Callable[[bytes], str | None]


@dataclass(frozen=True)
class Queue:
    queue_id: int
    name: str
    status: bool
    retention: bool
    activation_defined: bool
    activation_status: bool
    activation_procedure: str | None
    max_queue_readers: int
    execute_as: str | None
    poison_message_handling: bool


@dataclass(frozen=True)
class Service:
    service_id: int
    name: str
    queue_id: int
    contracts: frozenset[str]


@dataclass(frozen=True)
class Route:
    name: str
    service_name: str | None
    broker_instance: str | None
    address: str
    expires_at: float | None


@dataclass
class Catalog:
    """A consistent snapshot of the catalog tables at one ``catalog_version``."""

    version: str
    broker_instance: str
    honor_broker_priority: bool
    message_types: dict[str, MessageType] = field(default_factory=dict)
    contracts: dict[str, dict[str, str]] = field(default_factory=dict)
    queues: dict[str, Queue] = field(default_factory=dict)
    queues_by_id: dict[int, Queue] = field(default_factory=dict)
    services: dict[str, Service] = field(default_factory=dict)
    routes: list[Route] = field(default_factory=list)
    priorities: list[BrokerPriority] = field(default_factory=list)
    notifications: list[tuple[str, int, str, str]] = field(default_factory=list)

    def queue(self, name: str) -> Queue:
        try:
            return self.queues[name]
        except KeyError:
            raise NotFoundError(f"queue {name!r} does not exist") from None

    def service(self, name: str) -> Service:
        try:
            return self.services[name]
        except KeyError:
            raise NotFoundError(f"service {name!r} does not exist") from None

    def contract(self, name: str) -> dict[str, str]:
        try:
            return self.contracts[name]
        except KeyError:
            raise NotFoundError(f"contract {name!r} does not exist") from None


def current_version(conn: sqlite3.Connection) -> str:
    row = conn.execute("SELECT value FROM sb_meta WHERE key = 'catalog_version'").fetchone()
    return str(row[0])


def load(conn: sqlite3.Connection) -> Catalog:
    """Read the whole catalog in one read transaction (or the caller's open one)."""
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        meta = dict(conn.execute("SELECT key, value FROM sb_meta").fetchall())
        cat = Catalog(
            version=meta["catalog_version"],
            broker_instance=meta["broker_instance"],
            honor_broker_priority=meta.get("honor_broker_priority") == "1",
        )
        for name, kind, schema in conn.execute(
            "SELECT name, validation, json_schema FROM sb_message_types"
        ):
            cat.message_types[name] = MessageType(
                name, kind, code_for(kind), make_validator(kind, schema)
            )
        for (name,) in conn.execute("SELECT name FROM sb_contracts"):
            cat.contracts[name] = {}
        for contract, mtype, sent_by in conn.execute(
            "SELECT contract, message_type, sent_by FROM sb_contract_message_types"
        ):
            cat.contracts[contract][mtype] = sent_by
        for row in conn.execute(
            "SELECT queue_id, name, status, retention, activation_defined, activation_status,"
            " activation_procedure, max_queue_readers, execute_as, poison_message_handling"
            " FROM sb_queues"
        ):
            q = Queue(
                row[0], row[1], bool(row[2]), bool(row[3]), bool(row[4]), bool(row[5]),
                row[6], row[7], row[8], bool(row[9]),
            )
            cat.queues[q.name] = q
            cat.queues_by_id[q.queue_id] = q
        svc_contracts: dict[int, set[str]] = {}
        for sid, contract in conn.execute("SELECT service_id, contract FROM sb_service_contracts"):
            svc_contracts.setdefault(sid, set()).add(contract)
        for sid, name, qid in conn.execute("SELECT service_id, name, queue_id FROM sb_services"):
            cat.services[name] = Service(sid, name, qid, frozenset(svc_contracts.get(sid, ())))
        cat.routes = [
            Route(*row)
            for row in conn.execute(
                "SELECT name, service_name, broker_instance, address, expires_at FROM sb_routes"
            )
        ]
        cat.priorities = [
            BrokerPriority(*row)
            for row in conn.execute(
                "SELECT name, contract, local_service, remote_service, priority_level"
                " FROM sb_priorities"
            )
        ]
        cat.notifications = list(
            conn.execute("SELECT name, queue_id, event, to_service FROM sb_event_notifications")
        )
    finally:
        if own:
            conn.execute("COMMIT")
    return cat


# -- DDL -------------------------------------------------------------------------------------
def check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgumentError(f"{what} name must be a non-empty string, got {name!r}")
    if len(name) > 256:
        raise InvalidArgumentError(f"{what} name is longer than 256 characters: {name[:40]!r}...")
    return name


def _bump(conn: sqlite3.Connection) -> None:
    conn.execute(
        "UPDATE sb_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'catalog_version'"
    )


def _exists(conn: sqlite3.Connection, table: str, name: str) -> bool:
    return conn.execute(f"SELECT 1 FROM {table} WHERE name = ?", (name,)).fetchone() is not None


def _create(conn: sqlite3.Connection, table: str, what: str, name: str) -> None:
    if _exists(conn, table, name):
        raise DuplicateError(f"{what} {name!r} already exists", 15025)


def _need(conn: sqlite3.Connection, table: str, what: str, name: str) -> None:
    if not _exists(conn, table, name):
        raise NotFoundError(f"{what} {name!r} does not exist")


def create_message_type(conn: sqlite3.Connection, name: str, validation: object) -> None:
    check_name(name, "message type")
    kind, schema = normalize(validation)
    with write(conn):
        _create(conn, "sb_message_types", "message type", name)
        conn.execute(
            "INSERT INTO sb_message_types(name, validation, json_schema) VALUES (?, ?, ?)",
            (name, kind, schema),
        )
        _bump(conn)


def drop_message_type(conn: sqlite3.Connection, name: str) -> None:
    check_name(name, "message type")
    if name in BUILTIN_MESSAGE_TYPES:
        raise InvalidArgumentError(f"message type {name!r} is built in and cannot be dropped")
    with write(conn):
        _need(conn, "sb_message_types", "message type", name)
        used = conn.execute(
            "SELECT contract FROM sb_contract_message_types WHERE message_type = ?", (name,)
        ).fetchone()
        if used:
            raise InvalidArgumentError(
                f"message type {name!r} is used by contract {used[0]!r}: drop the contract first"
            )
        conn.execute("DELETE FROM sb_message_types WHERE name = ?", (name,))
        _bump(conn)


def create_contract(conn: sqlite3.Connection, name: str, types: Mapping[str, str]) -> None:
    check_name(name, "contract")
    if not isinstance(types, Mapping) or not types:
        raise InvalidArgumentError(
            "a contract needs a dict {message_type: 'initiator' | 'target' | 'any'}"
        )
    for mtype, sent_by in types.items():
        if sent_by not in SENT_BY:
            raise InvalidArgumentError(
                f"message type {mtype!r} in contract {name!r}: sent_by must be "
                f"'initiator', 'target' or 'any', not {sent_by!r}"
            )
    if not any(s in ("initiator", "any") for s in types.values()):
        raise InvalidArgumentError(
            f"contract {name!r} has no message type the initiator may send "
            "(mark at least one 'initiator' or 'any')"
        )
    with write(conn):
        _create(conn, "sb_contracts", "contract", name)
        for mtype in types:
            _need(conn, "sb_message_types", "message type", mtype)
        conn.execute("INSERT INTO sb_contracts(name) VALUES (?)", (name,))
        conn.executemany(
            "INSERT INTO sb_contract_message_types(contract, message_type, sent_by)"
            " VALUES (?, ?, ?)",
            [(name, mt, sb) for mt, sb in types.items()],
        )
        _bump(conn)


def drop_contract(conn: sqlite3.Connection, name: str) -> None:
    check_name(name, "contract")
    if name in BUILTIN_CONTRACTS:
        raise InvalidArgumentError(f"contract {name!r} is built in and cannot be dropped")
    with write(conn):
        _need(conn, "sb_contracts", "contract", name)
        used = conn.execute(
            "SELECT s.name FROM sb_service_contracts c JOIN sb_services s USING (service_id)"
            " WHERE c.contract = ?",
            (name,),
        ).fetchone()
        if used:
            raise InvalidArgumentError(
                f"contract {name!r} is used by service {used[0]!r}: alter or drop it first"
            )
        conn.execute("DELETE FROM sb_contracts WHERE name = ?", (name,))
        _bump(conn)


QUEUE_OPTIONS = ("status", "retention", "activation", "poison_message_handling")


def _queue_columns(options: Mapping[str, Any]) -> dict[str, Any]:
    cols: dict[str, Any] = {}
    for key, value in options.items():
        if key not in QUEUE_OPTIONS:
            raise InvalidArgumentError(
                f"unknown queue option {key!r}: use {', '.join(QUEUE_OPTIONS)}"
            )
        if key == "activation":
            if value is None:
                cols.update(
                    activation_defined=0, activation_status=0, activation_procedure=None,
                    max_queue_readers=0, execute_as=None,
                )
            elif isinstance(value, Activation):
                cols.update(
                    activation_defined=1, activation_status=int(value.status),
                    activation_procedure=value.procedure_name,
                    max_queue_readers=value.max_queue_readers, execute_as=value.execute_as,
                )
            else:
                raise InvalidArgumentError("activation must be an sbroker.Activation or None")
        else:
            if not isinstance(value, bool):
                raise InvalidArgumentError(f"queue option {key} must be True or False")
            cols[key] = int(value)
    return cols


def create_queue(conn: sqlite3.Connection, name: str, options: Mapping[str, Any]) -> None:
    check_name(name, "queue")
    cols = _queue_columns(options)
    with write(conn):
        _create(conn, "sb_queues", "queue", name)
        conn.execute("INSERT INTO sb_queues(name) VALUES (?)", (name,))
        _update_queue(conn, name, cols)
        _bump(conn)


def _update_queue(conn: sqlite3.Connection, name: str, cols: Mapping[str, Any]) -> None:
    if cols:
        sets = ", ".join(f"{c} = ?" for c in cols)
        conn.execute(f"UPDATE sb_queues SET {sets} WHERE name = ?", (*cols.values(), name))


def alter_queue(conn: sqlite3.Connection, name: str, options: Mapping[str, Any]) -> None:
    check_name(name, "queue")
    cols = _queue_columns(options)
    with write(conn):
        _need(conn, "sb_queues", "queue", name)
        if cols.get("status") == 1:
            cols["rollback_count"] = 0
        _update_queue(conn, name, cols)
        _bump(conn)


def drop_queue(conn: sqlite3.Connection, name: str) -> None:
    check_name(name, "queue")
    with write(conn):
        _need(conn, "sb_queues", "queue", name)
        used = conn.execute(
            "SELECT s.name FROM sb_services s JOIN sb_queues q USING (queue_id) WHERE q.name = ?",
            (name,),
        ).fetchone()
        if used:
            raise InvalidArgumentError(
                f"queue {name!r} is used by service {used[0]!r}: drop the service first"
            )
        conn.execute(
            "DELETE FROM sb_event_notifications WHERE queue_id ="
            " (SELECT queue_id FROM sb_queues WHERE name = ?)",
            (name,),
        )
        conn.execute("DELETE FROM sb_queues WHERE name = ?", (name,))
        _bump(conn)


def create_service(
    conn: sqlite3.Connection, name: str, queue: str, contracts: Any
) -> None:
    check_name(name, "service")
    check_name(queue, "queue")
    if isinstance(contracts, str):
        contracts = (contracts,)
    contracts = tuple(contracts)
    with write(conn):
        _create(conn, "sb_services", "service", name)
        row = conn.execute("SELECT queue_id FROM sb_queues WHERE name = ?", (queue,)).fetchone()
        if row is None:
            raise NotFoundError(f"queue {queue!r} does not exist")
        for contract in contracts:
            _need(conn, "sb_contracts", "contract", contract)
        cur = conn.execute(
            "INSERT INTO sb_services(name, queue_id) VALUES (?, ?)", (name, row[0])
        )
        conn.executemany(
            "INSERT INTO sb_service_contracts(service_id, contract) VALUES (?, ?)",
            [(cur.lastrowid, c) for c in dict.fromkeys(contracts)],
        )
        _bump(conn)


def drop_service(conn: sqlite3.Connection, name: str) -> None:
    check_name(name, "service")
    with write(conn):
        _need(conn, "sb_services", "service", name)
        conn.execute("DELETE FROM sb_services WHERE name = ?", (name,))
        _bump(conn)


def create_route(
    conn: sqlite3.Connection,
    name: str,
    service_name: str | None,
    address: str,
    broker_instance: str | None,
    expires_at: float | None,
) -> None:
    check_name(name, "route")
    if not isinstance(address, str) or not (
        address in ("LOCAL", "TRANSPORT") or address.startswith("tcp://")
    ):
        raise InvalidArgumentError(
            f"route address {address!r}: use 'tcp://host:port', 'LOCAL' or 'TRANSPORT'"
        )
    if address.startswith("tcp://"):
        hostport = address[len("tcp://") :]
        host, _, port = hostport.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidArgumentError(f"route address {address!r}: expected tcp://host:port")
    with write(conn):
        _create(conn, "sb_routes", "route", name)
        conn.execute(
            "INSERT INTO sb_routes(name, service_name, broker_instance, address, expires_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (name, service_name, broker_instance, address, expires_at),
        )
        _bump(conn)


def drop_route(conn: sqlite3.Connection, name: str) -> None:
    _drop_simple(conn, "sb_routes", "route", name)


def _drop_simple(conn: sqlite3.Connection, table: str, what: str, name: str) -> None:
    check_name(name, what)
    with write(conn):
        _need(conn, table, what, name)
        conn.execute(f"DELETE FROM {table} WHERE name = ?", (name,))
        _bump(conn)


def create_broker_priority(
    conn: sqlite3.Connection,
    name: str,
    contract: str,
    local_service: str,
    remote_service: str,
    priority_level: int,
) -> None:
    check_name(name, "broker priority")
    for value, what in ((contract, "contract"), (local_service, "local_service"),
                        (remote_service, "remote_service")):
        check_name(value, what)
    if isinstance(priority_level, bool) or not isinstance(priority_level, int) or not (
        1 <= priority_level <= 10
    ):
        raise InvalidArgumentError(
            f"priority_level must be an int from 1 (lowest) to 10, got {priority_level!r}"
        )
    with write(conn):
        _create(conn, "sb_priorities", "broker priority", name)
        if contract != ANY:
            _need(conn, "sb_contracts", "contract", contract)
        if local_service != ANY:
            _need(conn, "sb_services", "service", local_service)
        conn.execute(
            "INSERT INTO sb_priorities(name, contract, local_service, remote_service,"
            " priority_level) VALUES (?, ?, ?, ?, ?)",
            (name, contract, local_service, remote_service, priority_level),
        )
        _bump(conn)


def drop_broker_priority(conn: sqlite3.Connection, name: str) -> None:
    _drop_simple(conn, "sb_priorities", "broker priority", name)


def create_event_notification(
    conn: sqlite3.Connection, name: str, queue: str, event: str, to_service: str
) -> None:
    check_name(name, "event notification")
    check_name(to_service, "service")
    if event not in EVENTS:
        raise InvalidArgumentError(
            f"unknown event {event!r}: use {' or '.join(EVENTS)}"
        )
    with write(conn):
        _create(conn, "sb_event_notifications", "event notification", name)
        row = conn.execute("SELECT queue_id FROM sb_queues WHERE name = ?", (queue,)).fetchone()
        if row is None:
            raise NotFoundError(f"queue {queue!r} does not exist")
        conn.execute(
            "INSERT INTO sb_event_notifications(name, queue_id, event, to_service)"
            " VALUES (?, ?, ?, ?)",
            (name, row[0], event, to_service),
        )
        _bump(conn)


def drop_event_notification(conn: sqlite3.Connection, name: str) -> None:
    _drop_simple(conn, "sb_event_notifications", "event notification", name)


def set_option(conn: sqlite3.Connection, key: str, value: str) -> None:
    with write(conn):
        conn.execute("UPDATE sb_meta SET value = ? WHERE key = ?", (value, key))
        _bump(conn)
