"""Service Broker statements run on the broker's Python API: catalog DDL on the broker,
conversation statements on the session's transaction (SPEC §2-3, §14)."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql import procedures, sbendpoint, sqlexec, values
from sbroker.apps.tsql.errors import TSqlError
from sbroker.apps.tsql.evaluate import evaluate
from sbroker.apps.tsql.ports import TSqlBroker
from sbroker.apps.tsql.session import Frame, ResultSet
from sbroker.core.catalog import Activation
from sbroker.core.messages import Message

#: A T-SQL procedure named by an activation runs through this module (SPEC §5, §14).
ACTIVATE = "sbroker.apps.tsql.activate"
MESSAGE_COLUMNS = ("status", "priority", "queuing_order", "conversation_group_id",
                   "conversation_handle", "message_sequence_number", "service_name",
                   "service_id", "service_contract_name", "service_contract_id",
                   "message_type_name", "message_type_id", "validation", "message_body",
                   "message_enqueue_time")
VALIDATIONS = {"NONE": "none", "EMPTY": "empty", "WELL_FORMED_XML": "well_formed_xml"}


def _value(frame: Frame, value: Any) -> Any:
    return evaluate(value, frame) if isinstance(value, n.Expr) else value


def _on(value: Any, what: str) -> bool:
    if value in ("ON", 1, True):
        return True
    if value in ("OFF", 0, False):
        return False
    raise TSqlError(f"{what} must be ON or OFF, not {value!r}", 102, 15)


def activation_procedure(name: str) -> str:
    """PROCEDURE_NAME as the activation's import path: a T-SQL procedure by name, or a
    Python ``module:function`` given as a quoted name."""
    return name if ":" in name else f"{ACTIVATE}:{name}"


def _activation(frame: Frame, opts: dict[str, Any], current: Activation | None
                ) -> Activation | None:
    if opts.get("DROP"):
        return None
    procedure = opts.get("PROCEDURE_NAME")
    base = current or (Activation(activation_procedure(str(procedure))) if procedure else None)
    if base is None:
        raise TSqlError("ACTIVATION needs PROCEDURE_NAME the first time", 15151)
    execute_as = opts.get("EXECUTE", base.execute_as)
    return Activation(
        activation_procedure(str(procedure)) if procedure else base.procedure,
        int(_value(frame, opts.get("MAX_QUEUE_READERS", base.max_queue_readers))),
        _on(opts.get("STATUS", "ON" if base.status else "OFF"), "ACTIVATION STATUS"),
        None if execute_as is None else str(execute_as))


def _queue_options(frame: Frame, name: str, opts: dict[str, Any], alter: bool
                   ) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in opts.items():
        if key == "STATUS":
            out["status"] = _on(value, "STATUS")
        elif key == "RETENTION":
            out["retention"] = _on(value, "RETENTION")
        elif key == "POISON_MESSAGE_HANDLING":
            out["poison_message_handling"] = _on(value.get("STATUS"), "POISON_MESSAGE_HANDLING")
        elif key == "ACTIVATION":
            current = None
            if alter:
                queue = frame.session.broker.catalog.queue(name)
                if queue.activation_defined and queue.activation_procedure:
                    current = Activation(queue.activation_procedure, queue.max_queue_readers,
                                         queue.activation_status, queue.execute_as)
            out["activation"] = _activation(frame, value, current)
        else:
            raise TSqlError(f"QUEUE option {key} is not supported by sbroker", 40517, 15)
    return out


def _message_type(frame: Frame, a: dict[str, Any]) -> None:
    validation = VALIDATIONS.get(a["validation"])
    if validation is None:
        raise TSqlError(f"VALIDATION = {a['validation']} is not supported by sbroker",
                        40517, 15)
    if a.get("alter"):
        frame.session.broker.alter_message_type(a["name"], validation)
    else:
        frame.session.broker.create_message_type(a["name"], validation)


def _alter_service(frame: Frame, a: dict[str, Any]) -> None:
    changes: list[tuple[str, str]] = a["changes"]
    frame.session.broker.alter_service(
        a["name"], queue=a["queue"],
        add_contracts=[c for change, c in changes if change == "ADD"],
        drop_contracts=[c for change, c in changes if change == "DROP"])


def _queue(frame: Frame, a: dict[str, Any]) -> None:
    broker = frame.session.broker
    broker.create_queue(a["name"], **_queue_options(frame, a["name"], a["options"], False))


def _alter_queue(frame: Frame, a: dict[str, Any]) -> None:
    broker = frame.session.broker
    broker.alter_queue(a["name"], **_queue_options(frame, a["name"], a["options"], True))


def _address(address: str) -> str:
    """A route's ADDRESS as SQL Server reads it: 'TCP://host:port', 'LOCAL' and 'TRANSPORT'
    in any case."""
    if address.upper() in ("LOCAL", "TRANSPORT"):
        return address.upper()
    if address[:6].lower() == "tcp://":
        return "tcp://" + address[6:]
    return address


def _current(frame: Frame, kind: str, name: str) -> dict[str, Any]:
    """ALTER ROUTE / BROKER PRIORITY change only the options they name: the others as the
    object has them now, under their T-SQL names."""
    broker = frame.session.broker
    if kind == "route":
        route = next((r for r in broker.catalog.routes if r.name == name), None)
        if route is None:
            raise TSqlError(f"Cannot alter the route '{name}', because it does not exist or"
                            " you do not have permission.", 15151)
        left = None if route.expires_at is None else max(
            route.expires_at - broker.clock.now(), 0.001)
        return {"SERVICE_NAME": route.service_name, "ADDRESS": route.address,
                "BROKER_INSTANCE": route.broker_instance, "LIFETIME": left}
    p = next((p for p in broker.catalog.priorities if p.name == name), None)
    if p is None:
        raise TSqlError(f"Cannot alter the broker priority '{name}', because it does not exist"
                        " or you do not have permission.", 15151)
    return {"CONTRACT_NAME": p.contract, "LOCAL_SERVICE_NAME": p.local_service,
            "REMOTE_SERVICE_NAME": p.remote_service, "PRIORITY_LEVEL": p.priority_level}


def _route(frame: Frame, a: dict[str, Any]) -> None:
    opts = {k: _value(frame, v) for k, v in a["options"].items()}
    broker = frame.session.broker
    if a.get("alter"):
        opts = {**_current(frame, "route", a["name"]), **opts}
        broker.drop_route(a["name"])
    lifetime = opts.get("LIFETIME")
    broker.create_route(a["name"], opts.get("SERVICE_NAME"),
                        _address(str(opts.get("ADDRESS", "LOCAL"))),
                        opts.get("BROKER_INSTANCE"),
                        None if lifetime is None else float(lifetime))


def _priority(frame: Frame, a: dict[str, Any]) -> None:
    opts = {k: _value(frame, v) for k, v in a["options"].items()}
    broker = frame.session.broker
    if a.get("alter"):
        opts = {**_current(frame, "broker priority", a["name"]), **opts}
        broker.drop_broker_priority(a["name"])
    level = opts.get("PRIORITY_LEVEL", "DEFAULT")
    broker.create_broker_priority(
        a["name"], contract=str(opts.get("CONTRACT_NAME", "ANY")),
        local_service=str(opts.get("LOCAL_SERVICE_NAME", "ANY")),
        remote_service=str(opts.get("REMOTE_SERVICE_NAME", "ANY")),
        priority_level=5 if level == "DEFAULT" else int(level))


def _begin_dialog(frame: Frame, a: dict[str, Any]) -> None:
    opts = {k: _value(frame, v) for k, v in a["options"].items()}
    instance = _value(frame, a["instance"])
    if isinstance(instance, str) and instance.upper() == "CURRENT DATABASE":
        instance = None
    lifetime = opts.get("LIFETIME")
    with frame.session.work() as tx:
        handle = tx.begin_dialog(
            a["from_service"], values.text_of(_value(frame, a["to_service"])), a["contract"],
            broker_instance=instance,
            related_conversation=opts.get("RELATED_CONVERSATION"),
            related_conversation_group=opts.get("RELATED_CONVERSATION_GROUP"),
            lifetime=None if lifetime is None else float(lifetime),
            encryption=_on(opts.get("ENCRYPTION", "ON"), "ENCRYPTION"))
    frame.assign(a["handle"], handle)


def _body(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return values.text_of(value).encode("utf-8")


def _send(frame: Frame, a: dict[str, Any]) -> None:
    handles = [_value(frame, h) for h in a["handles"]]
    body = _body(_value(frame, a["body"]))
    with frame.session.work() as tx:
        tx.send(handles if len(handles) > 1 else handles[0], a["message_type"], body)


def _end(frame: Frame, a: dict[str, Any]) -> None:
    error = _value(frame, a["error"])
    with frame.session.work() as tx:
        tx.end_conversation(_value(frame, a["handle"]),
                            error=None if error is None else int(error),
                            description=None if a["description"] is None
                            else values.text_of(_value(frame, a["description"])),
                            cleanup=a["cleanup"])


def _timer(frame: Frame, a: dict[str, Any]) -> None:
    with frame.session.work() as tx:
        tx.begin_conversation_timer(_value(frame, a["handle"]),
                                    float(_value(frame, a["timeout"])))


def _move(frame: Frame, a: dict[str, Any]) -> None:
    with frame.session.work() as tx:
        tx.move_conversation(_value(frame, a["handle"]), _value(frame, a["group"]))


def _timeout(frame: Frame, a: dict[str, Any]) -> float | None:
    """WAITFOR's TIMEOUT in seconds: none or -1 waits for ever; plain statements 0."""
    if not a.get("waiting"):
        return 0
    value = _value(frame, a["timeout"])
    if value is None or int(value) < 0:
        return None
    return int(value) / 1000.0


def _get_group(frame: Frame, a: dict[str, Any]) -> None:
    with frame.session.work() as tx:
        group = tx.get_conversation_group(a["queue"], timeout=_timeout(frame, a))
    frame.assign(a["target"], group)
    frame.session.rowcount = 0 if group is None else 1


_KEPT = tuple(name for name in MESSAGE_COLUMNS if name in Message.__dataclass_fields__)
_KEPT_VALUES = operator.attrgetter(*_KEPT)
_NOT_KEPT = dict.fromkeys(name for name in MESSAGE_COLUMNS if name not in _KEPT)  # the *_id


def _row(msg: Message) -> dict[str, Any]:
    """A received message as RECEIVE's columns (the ids SQL Server numbers are NULL)."""
    row = dict(zip(_KEPT, _KEPT_VALUES(msg), strict=True))
    row.update(_NOT_KEPT)
    return row


def _receive(frame: Frame, a: dict[str, Any]) -> None:
    filters: dict[str, Any] = {}
    if a["where"] is not None:
        column, expr = a["where"]
        filters[column] = evaluate(expr, frame)
    top = None if a["top"] is None else int(evaluate(a["top"], frame))
    with frame.session.work() as tx:
        messages = tx.receive(a["queue"], top=top, timeout=_timeout(frame, a), **filters)
    frame.session.rowcount = len(messages)
    if messages:
        frame.session.received()
    items: tuple[n.SelectItem, ...] = a["items"]
    if any(item.target for item in items):
        for msg in messages:
            scope = frame.with_row(_row(msg))
            for item in items:
                if item.target is None or item.expr is None:
                    raise TSqlError("RECEIVE that assigns variables must assign every column",
                                    141)
                frame.assign(item.target, evaluate(item.expr, scope))
        return
    columns: list[str] = []
    for item in items:
        columns.extend(MESSAGE_COLUMNS if item.expr is None else
                       [item.alias or _column_name(item)])
    rows = []
    for msg in messages:
        row = _row(msg)
        scope = frame.with_row(row)
        out: list[Any] = []
        for item in items:
            out.extend([row[c] for c in MESSAGE_COLUMNS] if item.expr is None
                       else [evaluate(item.expr, scope)])
        rows.append(out)
    if a["into"] is not None:
        _insert_into(frame, a["into"], rows)
        return
    frame.session.results.append(ResultSet(columns, rows))


def _insert_into(frame: Frame, table: str, rows: list[list[Any]]) -> None:
    """RECEIVE ... INTO @table: each row inserted into the table variable, its columns in
    the order of the RECEIVE's."""
    if table not in frame.tables:
        raise TSqlError(f'Must declare the table variable "@{table}".', 1087)
    for row in rows:
        scope = sqlexec.new_frame(frame.session, frame.procedure)
        scope.tables = frame.tables
        names = [f"c{i}" for i in range(len(row))]
        for name, value in zip(names, row, strict=True):
            scope.types[name] = n.TypeName("SQL_VARIANT")
            scope.vars[name] = value
        sqlexec.run_sql(scope, f"INSERT INTO @{table} VALUES"
                               f" ({', '.join('@' + name for name in names)})")
    frame.session.rowcount = len(rows)


def _column_name(item: n.SelectItem) -> str:
    return item.expr.name if isinstance(item.expr, n.Column) else ""


def _broker(call: Callable[[TSqlBroker, dict[str, Any]], None]
            ) -> Callable[[Frame, dict[str, Any]], None]:
    """A statement that is one call on the broker with the parsed parts."""
    return lambda frame, a: call(frame.session.broker, a)


VERBS: dict[str, Callable[[Frame, dict[str, Any]], None]] = {
    "CREATE MESSAGE TYPE": _message_type,
    "ALTER MESSAGE TYPE": lambda f, a: _message_type(f, {**a, "alter": True}),
    "ALTER SERVICE": _alter_service,
    "CREATE ENDPOINT": sbendpoint.create, "ALTER ENDPOINT": sbendpoint.alter,
    "CREATE CONTRACT": _broker(lambda b, a: b.create_contract(a["name"], a["message_types"])),
    "CREATE QUEUE": _queue, "ALTER QUEUE": _alter_queue,
    "CREATE SERVICE": _broker(lambda b, a: b.create_service(a["name"], a["queue"],
                                                            a["contracts"])),
    "CREATE ROUTE": _route, "ALTER ROUTE": lambda f, a: _route(f, {**a, "alter": True}),
    "CREATE BROKER PRIORITY": _priority,
    "ALTER BROKER PRIORITY": lambda f, a: _priority(f, {**a, "alter": True}),
    "CREATE EVENT NOTIFICATION": _broker(lambda b, a: b.create_event_notification(
        a["name"], a["queue"], a["event"], a["to_service"])),
    "BEGIN DIALOG": _begin_dialog, "SEND": _send, "END CONVERSATION": _end,
    "BEGIN CONVERSATION TIMER": _timer, "MOVE CONVERSATION": _move,
    "GET CONVERSATION GROUP": _get_group, "RECEIVE": _receive,
}
DROPS: dict[str, Callable[[TSqlBroker, str], None]] = {
    "MESSAGE TYPE": lambda b, name: b.drop_message_type(name),
    "CONTRACT": lambda b, name: b.drop_contract(name),
    "QUEUE": lambda b, name: b.drop_queue(name),
    "SERVICE": lambda b, name: b.drop_service(name),
    "ROUTE": lambda b, name: b.drop_route(name),
    "BROKER PRIORITY": lambda b, name: b.drop_broker_priority(name),
    "EVENT NOTIFICATION": lambda b, name: b.drop_event_notification(name)}


def execute(frame: Frame, stmt: n.Broker) -> None:
    """Run a Service Broker statement."""
    verb = VERBS.get(stmt.verb)
    if verb is None:
        raise TSqlError(f"{stmt.verb} is not supported by sbroker", 40517, 15)
    verb(frame, stmt.args)


def drop(frame: Frame, stmt: n.DropObject) -> None:
    """DROP PROCEDURE / MESSAGE TYPE / CONTRACT / QUEUE / SERVICE / ROUTE / ..."""
    for name in stmt.names:
        if stmt.kind == "PROCEDURE":
            procedures.drop(frame, name, stmt.if_exists)
            continue
        if stmt.kind == "ENDPOINT":
            sbendpoint.drop(frame, name)
            continue
        dropper = DROPS.get(stmt.kind)
        if dropper is None:
            raise TSqlError(f"DROP {stmt.kind} is not supported by sbroker", 40517, 15)
        try:
            dropper(frame.session.broker, name)
        except LookupError:
            if not stmt.if_exists:
                raise
