"""What a catalog object is defined as, for ``create_*(exist_ok=True)``: creating an object
again with the same definition is a no-op; with a different one it is a DuplicateError
that says what differs (a script or a tour that runs twice must not fail, nor silently keep
an object that is not what it asked for)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sbroker.core.catalog import Activation, Catalog
from sbroker.core.errors import DuplicateError
from sbroker.core.validation import normalize
from sbroker.storage.ports import Connection

Definition = dict[str, Any]


def _message_type(conn: Connection, cat: Catalog, name: str) -> Definition | None:
    row = conn.query_one(conn.sql.message_type_definition, (name,))
    return None if row is None else {"validation": row[0], "schema": row[1]}


def _contract(conn: Connection, cat: Catalog, name: str) -> Definition | None:
    types = cat.contracts.get(name)
    return None if types is None else {"message_types": dict(types)}


def _queue(conn: Connection, cat: Catalog, name: str) -> Definition | None:
    q = cat.queues.get(name)
    if q is None:
        return None
    activation = (q.activation_procedure, q.max_queue_readers, q.activation_status,
                  q.execute_as) if q.activation_defined else None
    return {"status": q.status, "retention": q.retention, "activation": activation,
            "poison_message_handling": q.poison_message_handling}


def _service(conn: Connection, cat: Catalog, name: str) -> Definition | None:
    svc = cat.services.get(name)
    if svc is None:
        return None
    return {"queue": cat.queues_by_id[svc.queue_id].name, "contracts": sorted(svc.contracts)}


def _route(conn: Connection, cat: Catalog, name: str) -> Definition | None:
    route = next((r for r in cat.routes if r.name == name), None)
    if route is None:
        return None
    return {"service_name": route.service_name, "address": route.address,
            "broker_instance": route.broker_instance,
            "lifetime": "none" if route.expires_at is None else "set"}


def _priority(conn: Connection, cat: Catalog, name: str) -> Definition | None:
    p = next((p for p in cat.priorities if p.name == name), None)
    if p is None:
        return None
    return {"contract": p.contract, "local_service": p.local_service,
            "remote_service": p.remote_service, "priority_level": p.priority_level}


def _notification(conn: Connection, cat: Catalog, name: str) -> Definition | None:
    row = next((n for n in cat.notifications if n[0] == name), None)
    if row is None:
        return None
    queue = cat.queues_by_id.get(row[1])
    return {"queue": queue.name if queue else None, "event": row[2], "to_service": row[3]}


CURRENT: dict[str, Callable[[Connection, Catalog, str], Definition | None]] = {
    "message type": _message_type, "contract": _contract, "queue": _queue,
    "service": _service, "route": _route, "broker priority": _priority,
    "event notification": _notification,
}


def wanted(kind: str, args: Mapping[str, Any]) -> Definition:
    """The definition a ``create_*`` call asks for, in the form ``CURRENT`` reads back."""
    out = dict(args)
    if kind == "message type":
        out["validation"], out["schema"] = normalize(args["validation"])
    elif kind == "contract":
        out["message_types"] = dict(args["message_types"])
    elif kind == "queue":
        act = args.get("activation")
        out["activation"] = None if act is None else (
            act.procedure_name, act.max_queue_readers, act.status, act.execute_as)
        assert act is None or isinstance(act, Activation)
    elif kind == "service":
        contracts = args["contracts"]
        out["contracts"] = sorted({contracts} if isinstance(contracts, str) else set(contracts))
    elif kind == "route":
        out["lifetime"] = "none" if args.get("lifetime") is None else "set"
    return out


def same(conn: Connection, cat: Catalog, kind: str, name: str,
         args: Mapping[str, Any]) -> bool:
    """False when no ``kind`` named ``name`` exists; True when it exists as ``args`` define
    it; a DuplicateError (one line, what differs) when it exists otherwise."""
    current = CURRENT[kind](conn, cat, name)
    if current is None:
        return False
    return check(f"{kind} {name!r}", current, wanted(kind, args))


def check(what: str, current: Mapping[str, Any], asked: Mapping[str, Any],
          secret: frozenset[str] = frozenset()) -> bool:
    """True when ``asked`` matches ``current`` on every key it names, else DuplicateError;
    the values of ``secret`` keys are not printed."""
    diffs = [key if key in secret else f"{key}: {current.get(key)!r}, asked {value!r}"
             for key, value in asked.items() if current.get(key) != value]
    if diffs:
        raise DuplicateError(f"{what} already exists with a different definition"
                             f" ({'; '.join(diffs)}): drop it first, or create it with the"
                             " same definition", 15025)
    return True


def create_once(exist_ok: bool, same: Callable[[], bool], create: Callable[[], None]) -> bool:
    """Run ``create``; with ``exist_ok`` an object already defined the same way (``same()``)
    is left alone and one defined otherwise is a DuplicateError. True when it created."""
    if exist_ok and same():
        return False
    try:
        create()
    except DuplicateError:
        if not exist_ok or not same():  # another process created it meanwhile
            raise
        return False
    return True
