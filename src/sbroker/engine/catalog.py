"""The catalog in the database: loading a consistent snapshot, keeping it cached while the
catalog version stays the same, and the DDL statements (each runs inside a short write
transaction given by the engine)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sbroker.core.catalog import (
    BUILTIN_CONTRACTS,
    BUILTIN_MESSAGE_TYPES,
    EVENTS,
    SENT_BY,
    Activation,
    Catalog,
    MessageType,
    Queue,
    Route,
    Service,
    check_name,
)
from sbroker.core.clock import Clock
from sbroker.core.errors import DuplicateError, InvalidArgumentError, NotFoundError
from sbroker.core.priority import ANY, BrokerPriority
from sbroker.core.validation import code_for, make_validator, normalize
from sbroker.storage.ports import Connection

__all__ = ["Activation", "Catalog", "CatalogCache", "Queue", "load"]


def current_version(conn: Connection) -> str:
    row = conn.query_one(conn.sql.catalog_version)
    assert row is not None
    return str(row[0])


def load(conn: Connection) -> Catalog:
    """Read the whole catalog in one read transaction (or the caller's open one)."""
    sql = conn.sql
    own = not conn.in_transaction
    if own:
        conn.begin()
    try:
        meta: dict[str, str] = dict(conn.query_all(sql.catalog_meta))
        cat = Catalog(
            version=str(meta["catalog_version"]),
            broker_instance=str(meta["broker_instance"]),
            honor_broker_priority=meta.get("honor_broker_priority") == "1",
        )
        for name, kind, schema in conn.query_all(sql.catalog_message_types):
            cat.message_types[name] = MessageType(
                name, kind, code_for(kind), make_validator(kind, schema))
        for (name,) in conn.query_all(sql.catalog_contracts):
            cat.contracts[name] = {}
        for contract, mtype, sent_by in conn.query_all(sql.catalog_contract_message_types):
            cat.contracts[contract][mtype] = sent_by
        for row in conn.query_all(sql.catalog_queues):
            q = Queue(row[0], row[1], bool(row[2]), bool(row[3]), bool(row[4]), bool(row[5]),
                      row[6], row[7], row[8], bool(row[9]))
            cat.queues[q.name] = q
            cat.queues_by_id[q.queue_id] = q
        svc_contracts: dict[int, set[str]] = {}
        for sid, contract in conn.query_all(sql.catalog_service_contracts):
            svc_contracts.setdefault(sid, set()).add(contract)
        for sid, name, qid in conn.query_all(sql.catalog_services):
            cat.services[name] = Service(sid, name, qid, frozenset(svc_contracts.get(sid, ())))
        cat.routes = [Route(*row) for row in conn.query_all(sql.catalog_routes)]
        cat.priorities = [BrokerPriority(*row) for row in conn.query_all(sql.catalog_priorities)]
        cat.notifications = [(str(a), int(b), str(c), str(d))
                             for a, b, c, d in conn.query_all(sql.catalog_notifications)]
    finally:
        if own:
            conn.commit()
    return cat


class CatalogCache:
    """The catalog snapshot of one broker, checked against the database's catalog version
    unless checked in the last ``max_age`` seconds (statements pass a few ms: COMMIT checks
    the version anyway)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.current: Catalog | None = None
        self._checked = 0.0
        self._ddl = 0  # this process's DDL count: a check that raced one is no check

    def fresh(self, max_age: float) -> Catalog | None:
        """The snapshot if it was checked in the last ``max_age`` seconds, else None: a
        caller with no connection yet takes one only when it must look."""
        with self._lock:
            if self.current is not None and self._clock.monotonic() - self._checked < max_age:
                return self.current
        return None

    def get(self, conn: Connection, *, max_age: float = 0.0) -> Catalog:
        with self._lock:
            if max_age and self.current is not None and (
                    self._clock.monotonic() - self._checked < max_age):
                return self.current
            ddl = self._ddl
        version = current_version(conn)
        with self._lock:
            if self.current is not None and self.current.version == version:
                if ddl == self._ddl:
                    self._checked = self._clock.monotonic()
                return self.current
        fresh = load(conn)
        with self._lock:
            self.current = fresh
            if ddl == self._ddl:  # else DDL committed meanwhile: check next time
                self._checked = self._clock.monotonic()
        return fresh

    def changed_here(self) -> None:
        """This process changed the catalog: look again next time."""
        with self._lock:
            self._checked = 0.0
            self._ddl += 1


# -- DDL: each function runs inside a write transaction ---------------------------------------
_KINDS = {  # what -> the name of its table's blocks: exists_<t>, delete_<t>
    "message type": "message_type", "contract": "contract", "queue": "queue",
    "service": "service", "route": "route", "broker priority": "priority",
    "event notification": "notification",
}


def _bump(conn: Connection) -> None:
    conn.execute(conn.sql.bump_catalog_version)


def _exists(conn: Connection, what: str, name: str) -> bool:
    sql = conn.sql[f"exists_{_KINDS[what]}"]
    return conn.query_one(sql, (name,)) is not None


def _create(conn: Connection, what: str, name: str) -> None:
    if _exists(conn, what, name):
        raise DuplicateError(f"{what} {name!r} already exists", 15025)


def _need(conn: Connection, what: str, name: str) -> None:
    if not _exists(conn, what, name):
        raise NotFoundError(f"{what} {name!r} does not exist")


def _drop(conn: Connection, what: str, name: str) -> None:
    check_name(name, what)
    _need(conn, what, name)
    conn.execute(conn.sql[f"delete_{_KINDS[what]}"], (name,))
    _bump(conn)


def create_message_type(name: str, validation: object) -> Callable[[Connection], None]:
    check_name(name, "message type")
    kind, schema = normalize(validation)

    def ddl(conn: Connection) -> None:
        _create(conn, "message type", name)
        conn.execute(conn.sql.insert_message_type, (name, kind, schema))
        _bump(conn)

    return ddl


def drop_message_type(name: str) -> Callable[[Connection], None]:
    check_name(name, "message type")
    if name in BUILTIN_MESSAGE_TYPES:
        raise InvalidArgumentError(f"message type {name!r} is built in and cannot be dropped")

    def ddl(conn: Connection) -> None:
        _need(conn, "message type", name)
        used = conn.query_one(conn.sql.contract_using_message_type, (name,))
        if used:
            raise InvalidArgumentError(
                f"message type {name!r} is used by contract {used[0]!r}: drop the contract first"
            )
        _drop(conn, "message type", name)

    return ddl


def create_contract(name: str, types: Mapping[str, str]) -> Callable[[Connection], None]:
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

    def ddl(conn: Connection) -> None:
        sql = conn.sql
        _create(conn, "contract", name)
        for mtype in types:
            _need(conn, "message type", mtype)
        conn.execute(sql.insert_contract, (name,))
        conn.executemany(sql.insert_contract_message_type,
                         [(name, mt, sb) for mt, sb in types.items()])
        _bump(conn)

    return ddl


def drop_contract(name: str) -> Callable[[Connection], None]:
    check_name(name, "contract")
    if name in BUILTIN_CONTRACTS:
        raise InvalidArgumentError(f"contract {name!r} is built in and cannot be dropped")

    def ddl(conn: Connection) -> None:
        _need(conn, "contract", name)
        used = conn.query_one(conn.sql.service_using_contract, (name,))
        if used:
            raise InvalidArgumentError(
                f"contract {name!r} is used by service {used[0]!r}: alter or drop it first"
            )
        _drop(conn, "contract", name)

    return ddl


QUEUE_OPTIONS = ("status", "retention", "activation", "poison_message_handling")
_QUEUE_COLUMNS = ("status", "retention", "activation_defined", "activation_status",
                  "activation_procedure", "max_queue_readers", "execute_as",
                  "poison_message_handling", "rollback_count")


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


def _set_queue(conn: Connection, name: str, changes: Mapping[str, Any]) -> None:
    """Write the queue's options with ``changes`` applied (one statement, every column)."""
    sql = conn.sql
    row = conn.query_one(sql.queue_options, (name,))
    assert row is not None
    current = dict(zip(_QUEUE_COLUMNS, row, strict=True))
    current.update(changes)
    conn.execute(sql.update_queue_options, (*(current[c] for c in _QUEUE_COLUMNS), name))


def create_queue(name: str, options: Mapping[str, Any]) -> Callable[[Connection], None]:
    check_name(name, "queue")
    cols = _queue_columns(options)

    def ddl(conn: Connection) -> None:
        _create(conn, "queue", name)
        conn.execute(conn.sql.insert_queue, (name,))
        _set_queue(conn, name, cols)
        _bump(conn)

    return ddl


def alter_queue(name: str, options: Mapping[str, Any]) -> Callable[[Connection], None]:
    check_name(name, "queue")
    cols = _queue_columns(options)
    if cols.get("status") == 1:
        cols["rollback_count"] = 0

    def ddl(conn: Connection) -> None:
        _need(conn, "queue", name)
        _set_queue(conn, name, cols)
        _bump(conn)

    return ddl


def drop_queue(name: str) -> Callable[[Connection], None]:
    check_name(name, "queue")

    def ddl(conn: Connection) -> None:
        sql = conn.sql
        _need(conn, "queue", name)
        used = conn.query_one(sql.service_using_queue, (name,))
        if used:
            raise InvalidArgumentError(
                f"queue {name!r} is used by service {used[0]!r}: drop the service first"
            )
        conn.execute(sql.delete_queue_notifications, (name,))
        _drop(conn, "queue", name)

    return ddl


def create_service(name: str, queue: str, contracts: Any) -> Callable[[Connection], None]:
    check_name(name, "service")
    check_name(queue, "queue")
    if isinstance(contracts, str):
        contracts = (contracts,)
    contracts = tuple(dict.fromkeys(contracts))

    def ddl(conn: Connection) -> None:
        sql = conn.sql
        _create(conn, "service", name)
        row = conn.query_one(sql.queue_id_by_name, (queue,))
        if row is None:
            raise NotFoundError(f"queue {queue!r} does not exist")
        for contract in contracts:
            _need(conn, "contract", contract)
        created = conn.query_one(sql.insert_service, (name, row[0]))
        assert created is not None
        conn.executemany(sql.insert_service_contract, [(created[0], c) for c in contracts])
        _bump(conn)

    return ddl


def alter_message_type(name: str, validation: object) -> Callable[[Connection], None]:
    """A message type's validation changed (ALTER MESSAGE TYPE): messages enqueued from now
    on are checked against it; those already in queues stay."""
    check_name(name, "message type")
    if name in BUILTIN_MESSAGE_TYPES:
        raise InvalidArgumentError(f"message type {name!r} is built in and cannot be altered")
    kind, schema = normalize(validation)

    def ddl(conn: Connection) -> None:
        _need(conn, "message type", name)
        conn.execute(conn.sql.update_message_type, (kind, schema, name))
        _bump(conn)

    return ddl


def alter_service(name: str, queue: str | None, add: Iterable[str] = (),
                  drop: Iterable[str] = ()) -> Callable[[Connection], None]:
    """ALTER SERVICE: another queue (refused while the service has conversations: their
    messages would have to move with them), contracts added or dropped (conversations
    begun on a dropped contract go on; new ones to the service on it are refused)."""
    check_name(name, "service")
    if queue is not None:
        check_name(queue, "queue")
    added, dropped = tuple(add), tuple(drop)

    def ddl(conn: Connection) -> None:
        sql = conn.sql
        _need(conn, "service", name)
        if queue is not None:
            _need(conn, "queue", queue)
            if conn.query_one(sql.service_conversation, (name,)) is not None:
                raise InvalidArgumentError(
                    f"service {name!r} has conversations: end them before moving it to"
                    f" queue {queue!r}")
            conn.execute(sql.update_service_queue, (queue, name))
        for contract in dropped:
            if conn.query_one(sql.service_has_contract, (name, contract)) is None:
                raise NotFoundError(f"service {name!r} has no contract {contract!r}")
            conn.execute(sql.drop_service_contract, (name, contract))
        for contract in added:
            _need(conn, "contract", contract)
            if conn.query_one(sql.service_has_contract, (name, contract)) is not None:
                raise DuplicateError(f"service {name!r} already has contract {contract!r}")
            conn.execute(sql.add_service_contract, (contract, name))
        _bump(conn)

    return ddl


def drop_service(name: str) -> Callable[[Connection], None]:
    check_name(name, "service")
    return lambda conn: _drop(conn, "service", name)


def create_route(name: str, service_name: str | None, address: str,
                 broker_instance: str | None, expires_at: float | None
                 ) -> Callable[[Connection], None]:
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

    def ddl(conn: Connection) -> None:
        _create(conn, "route", name)
        conn.execute(conn.sql.insert_route,
                     (name, service_name, broker_instance, address, expires_at))
        _bump(conn)

    return ddl


def drop_route(name: str) -> Callable[[Connection], None]:
    check_name(name, "route")
    return lambda conn: _drop(conn, "route", name)


def create_broker_priority(name: str, contract: str, local_service: str, remote_service: str,
                           priority_level: int) -> Callable[[Connection], None]:
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

    def ddl(conn: Connection) -> None:
        _create(conn, "broker priority", name)
        if contract != ANY:
            _need(conn, "contract", contract)
        if local_service != ANY:
            _need(conn, "service", local_service)
        conn.execute(conn.sql.insert_priority,
                     (name, contract, local_service, remote_service, priority_level))
        _bump(conn)

    return ddl


def drop_broker_priority(name: str) -> Callable[[Connection], None]:
    check_name(name, "broker priority")
    return lambda conn: _drop(conn, "broker priority", name)


def create_event_notification(name: str, queue: str, event: str, to_service: str
                              ) -> Callable[[Connection], None]:
    check_name(name, "event notification")
    check_name(to_service, "service")
    if event not in EVENTS:
        raise InvalidArgumentError(f"unknown event {event!r}: use {' or '.join(EVENTS)}")

    def ddl(conn: Connection) -> None:
        sql = conn.sql
        _create(conn, "event notification", name)
        row = conn.query_one(sql.queue_id_by_name, (queue,))
        if row is None:
            raise NotFoundError(f"queue {queue!r} does not exist")
        conn.execute(sql.insert_notification, (name, row[0], event, to_service))
        _bump(conn)

    return ddl


def drop_event_notification(name: str) -> Callable[[Connection], None]:
    check_name(name, "event notification")
    return lambda conn: _drop(conn, "event notification", name)


def set_option(key: str, value: str) -> Callable[[Connection], None]:
    def ddl(conn: Connection) -> None:
        conn.execute(conn.sql.set_option, (value, key))
        _bump(conn)

    return ddl
