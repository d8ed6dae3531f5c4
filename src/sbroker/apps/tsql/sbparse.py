"""Rules of the Service Broker statements: catalog DDL (MESSAGE TYPE, CONTRACT, QUEUE,
SERVICE, ROUTE, BROKER PRIORITY, ENDPOINT, EVENT NOTIFICATION) and the conversation
statements (BEGIN DIALOG, SEND, RECEIVE, WAITFOR (RECEIVE), GET CONVERSATION GROUP,
END CONVERSATION, BEGIN CONVERSATION TIMER, MOVE CONVERSATION).  Each yields a
``nodes.Broker`` whose ``verb`` names the statement and whose ``args`` hold its parts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql.grammar import Parser, Rule
from sbroker.apps.tsql.tokens import Kind, Token

DdlRule = Callable[[Parser, Token, str], n.Stmt]


def _stmt(first: Token, verb: str, **args: Any) -> n.Broker:
    return n.Broker(first.line, first.column, verb, args)


def option_value(p: Parser) -> Any:
    """A value in an option list: a nested ``( ... )`` list, a string, a number, a
    variable expression, or a word (upper-cased)."""
    if p.tok.is_op("("):
        return options(p)
    tok = p.tok
    if tok.kind is Kind.STRING:
        return p.advance().value
    if tok.kind is Kind.NUMBER or tok.is_op("-") or tok.kind is Kind.VAR:
        return p.expression()
    if tok.kind is Kind.QUOTED:
        return p.dotted_name()
    name = p.dotted_name()
    return name.upper() if name.upper() in ("ON", "OFF", "ANY", "DEFAULT", "NONE",
                                            "SELF", "OWNER", "EMPTY", "WELL_FORMED_XML",
                                            "DROP") else name


def options(p: Parser) -> dict[str, Any]:
    """``(KEY = value, KEY (...), EXECUTE AS x, ...)`` or the same without parentheses."""
    out: dict[str, Any] = {}
    parens = p.accept_op("(") is not None
    while True:
        if parens and p.accept_op(")"):
            return out
        key = p.name().upper()
        if key == "EXECUTE":
            p.expect_word("AS")
            out[key] = option_value(p)
        elif p.accept_op("="):
            out[key] = option_value(p)
        elif p.tok.is_op("("):
            out[key] = options(p)
        else:
            out[key] = True  # DROP, CLEANUP ...
        if not p.accept_op(","):
            if parens:
                p.expect_op(")")
            return out


def message_type(p: Parser, first: Token, action: str) -> n.Stmt:
    name = p.dotted_name()
    _authorization(p)
    validation = "NONE"
    if p.accept_word("VALIDATION"):
        p.expect_op("=")
        validation = p.name().upper()
        if p.accept_word("WITH"):
            raise p.unsupported("VALIDATION = VALID_XML WITH SCHEMA COLLECTION")
    return _stmt(first, f"{action} MESSAGE TYPE", name=name, validation=validation)


def _authorization(p: Parser) -> None:
    if p.accept_word("AUTHORIZATION"):
        p.name()


def contract(p: Parser, first: Token, action: str) -> n.Stmt:
    if action == "ALTER":  # SQL Server has none: a contract is dropped and created again
        raise p.error("ALTER CONTRACT does not exist in SQL Server nor here: a contract cannot"
                      " change; ALTER SERVICE ... (DROP CONTRACT c), DROP CONTRACT c, CREATE"
                      " CONTRACT c (...), then ALTER SERVICE ... (ADD CONTRACT c)")
    name = p.dotted_name()
    _authorization(p)
    p.expect_op("(")
    types: dict[str, str] = {}
    while True:
        mtype = p.dotted_name()
        p.expect_word("SENT")
        p.expect_word("BY")
        types[mtype] = p.expect_word("INITIATOR", "TARGET", "ANY").upper.lower()
        if not p.accept_op(","):
            break
    p.expect_op(")")
    return _stmt(first, "CREATE CONTRACT", name=name, message_types=types)


def queue(p: Parser, first: Token, action: str) -> n.Stmt:
    name = p.dotted_name()
    opts: dict[str, Any] = {}
    if p.accept_word("WITH"):
        opts = options(p)
    elif action == "ALTER" and p.tok.is_word("REBUILD", "REORGANIZE", "MOVE"):
        raise p.unsupported(f"ALTER QUEUE {p.tok.value.upper()}")
    if p.accept_word("ON"):
        p.name()  # a filegroup: one database file here
    return _stmt(first, f"{action} QUEUE", name=name, options=opts)


def service(p: Parser, first: Token, action: str) -> n.Stmt:
    name = p.dotted_name()
    _authorization(p)
    queue_name = None
    if p.accept_word("ON"):
        p.expect_word("QUEUE")
        queue_name = p.dotted_name()
    contracts: list[str] = []
    changes: list[tuple[str, str]] = []
    if p.accept_op("("):
        while not p.accept_op(")"):
            if action == "ALTER":
                change = p.expect_word("ADD", "DROP").upper
                p.expect_word("CONTRACT")
                changes.append((change, p.dotted_name()))
            else:
                contracts.append(p.dotted_name())
            p.accept_op(",")
    return _stmt(first, f"{action} SERVICE", name=name, queue=queue_name,
                 contracts=contracts, changes=changes)


def route(p: Parser, first: Token, action: str) -> n.Stmt:
    name = p.dotted_name()
    _authorization(p)
    p.expect_word("WITH")
    return _stmt(first, f"{action} ROUTE", name=name, options=options(p))


def priority(p: Parser, first: Token, action: str) -> n.Stmt:
    name = p.dotted_name()
    p.expect_word("FOR")
    p.expect_word("CONVERSATION")
    p.expect_word("SET")
    return _stmt(first, f"{action} BROKER PRIORITY", name=name, options=options(p))


def endpoint(p: Parser, first: Token, action: str) -> n.Stmt:
    """``CREATE | ALTER ENDPOINT name [STATE = ...] [AS TCP (...)] [FOR SERVICE_BROKER
    (...)]``; the options are kept as written (sbendpoint maps them)."""
    name = p.name()
    _authorization(p)
    opts: dict[str, Any] = {}
    if p.accept_word("STATE"):
        p.expect_op("=")
        opts["STATE"] = p.expect_word("STARTED", "STOPPED", "DISABLED").upper
    if p.accept_word("AS"):
        if not p.tok.is_word("TCP"):
            raise p.unsupported(f"ENDPOINT AS {p.tok.value.upper()}")
        p.advance()
        opts.update(_endpoint_options(p, _tcp_option))
    if action == "CREATE" or p.tok.is_word("FOR"):
        p.expect_word("FOR")
        if not p.tok.is_word("SERVICE_BROKER"):
            raise p.unsupported(f"ENDPOINT FOR {p.tok.value.upper()}")
        p.advance()
        if p.tok.is_op("("):
            opts.update(_endpoint_options(p, _broker_option))
    return _stmt(first, f"{action} ENDPOINT", name=name, options=opts)


def _endpoint_options(p: Parser, one: Callable[[Parser, str], Any]) -> dict[str, Any]:
    """``(KEY = value [,] KEY = value ...)`` where ``one`` reads the value of each key."""
    out: dict[str, Any] = {}
    p.expect_op("(")
    while not p.accept_op(")"):
        key = p.name().upper()
        p.expect_op("=")
        out[key] = one(p, key)
        p.accept_op(",")
    return out


def _tcp_option(p: Parser, key: str) -> Any:
    if key == "LISTENER_PORT":
        return p.expression()
    if key != "LISTENER_IP":
        raise p.unsupported(f"TCP option {key}")
    if p.accept_word("ALL"):
        return "ALL"
    opening = p.expect_op("(")
    if p.tok.kind is Kind.STRING:  # ("::1"): an IPv6 address
        address = p.advance().value
        p.expect_op(")")
        return address
    while not p.tok.is_op(")") and p.tok.kind is not Kind.EOF:
        p.advance()
    closing = p.expect_op(")")
    return p.text[opening.end:closing.start].strip()


def _broker_option(p: Parser, key: str) -> Any:
    if key == "AUTHENTICATION":
        methods: dict[str, str | None] = {}
        while p.tok.is_word("WINDOWS", "CERTIFICATE"):
            method = p.advance().upper
            if method == "CERTIFICATE":
                methods[method] = p.name()
            else:
                tok = p.accept_word("NTLM", "KERBEROS", "NEGOTIATE")
                methods[method] = tok.upper if tok else None
        if not methods:
            raise p.error("expected WINDOWS or CERTIFICATE")
        return methods
    if key == "ENCRYPTION":
        mode = p.expect_word("DISABLED", "SUPPORTED", "REQUIRED").upper
        if p.accept_word("ALGORITHM"):
            p.expect_word("AES", "RC4")
            p.accept_word("AES", "RC4")
        return mode
    if key == "MESSAGE_FORWARDING":
        return p.expect_word("ENABLED", "DISABLED").upper
    if key == "MESSAGE_FORWARD_SIZE":
        return p.expression()
    raise p.unsupported(f"SERVICE_BROKER option {key}")


def event_notification(p: Parser, first: Token, action: str) -> n.Stmt:
    name = p.dotted_name()
    p.expect_word("ON")
    p.expect_word("QUEUE")
    queue_name = p.dotted_name()
    p.expect_word("FOR")
    event = p.name().upper()
    p.expect_word("TO")
    p.expect_word("SERVICE")
    to_service = p.name_or_string()
    if p.accept_op(","):
        p.name_or_string()
    return _stmt(first, f"{action} EVENT NOTIFICATION", name=name, queue=queue_name,
                 event=event, to_service=to_service)


DDL: dict[str, DdlRule] = {
    "MESSAGE TYPE": message_type, "CONTRACT": contract, "QUEUE": queue, "SERVICE": service,
    "ROUTE": route, "BROKER PRIORITY": priority, "ENDPOINT": endpoint,
    "EVENT NOTIFICATION": event_notification,
}


# -- conversations ---------------------------------------------------------------------------
def begin_dialog(p: Parser) -> n.Stmt:
    first = p.advance()
    p.advance()
    p.accept_word("CONVERSATION")
    handle = p.variable()
    p.expect_word("FROM")
    p.expect_word("SERVICE")
    from_service = p.name_or_string()
    p.expect_word("TO")
    p.expect_word("SERVICE")
    to_service = p.expression()
    instance = p.expression() if p.accept_op(",") else None
    contract_name = "DEFAULT"
    if p.accept_word("ON"):
        p.expect_word("CONTRACT")
        contract_name = p.name_or_string()
    opts = options(p) if p.accept_word("WITH") else {}
    return _stmt(first, "BEGIN DIALOG", handle=handle, from_service=from_service,
                 to_service=to_service, instance=instance, contract=contract_name,
                 options=opts)


def begin_timer(p: Parser) -> n.Stmt:
    first = p.advance()
    p.expect_word("CONVERSATION")
    p.expect_word("TIMER")
    p.expect_op("(")
    handle = p.expression()
    p.expect_op(")")
    p.expect_word("TIMEOUT")
    p.expect_op("=")
    return _stmt(first, "BEGIN CONVERSATION TIMER", handle=handle, timeout=p.expression())


def send(p: Parser) -> n.Stmt:
    first = p.advance()
    p.expect_word("ON")
    p.expect_word("CONVERSATION")
    handles = []
    if p.accept_op("("):
        handles.append(p.expression())
        while p.accept_op(","):
            handles.append(p.expression())
        p.expect_op(")")
    else:
        handles.append(p.expression())
    mtype = "DEFAULT"
    if p.accept_word("MESSAGE"):
        p.expect_word("TYPE")
        mtype = p.dotted_name()
    body = None
    if p.accept_op("("):
        body = p.expression()
        p.expect_op(")")
    return _stmt(first, "SEND", handles=handles, message_type=mtype, body=body)


def end_conversation(p: Parser) -> n.Stmt:
    first = p.advance()
    p.expect_word("CONVERSATION")
    handle = p.expression()
    error = description = None
    cleanup = False
    if p.accept_word("WITH"):
        if p.accept_word("CLEANUP"):
            cleanup = True
        else:
            p.expect_word("ERROR")
            p.expect_op("=")
            error = p.expression()
            p.expect_word("DESCRIPTION")
            p.expect_op("=")
            description = p.expression()
    return _stmt(first, "END CONVERSATION", handle=handle, error=error,
                 description=description, cleanup=cleanup)


def move(p: Parser) -> n.Stmt:
    first = p.advance()
    p.expect_word("CONVERSATION")
    handle = p.expression()
    p.expect_word("TO")
    return _stmt(first, "MOVE CONVERSATION", handle=handle, group=p.expression())


def get_group(p: Parser) -> n.Stmt:
    first = p.advance()
    p.expect_word("CONVERSATION")
    p.expect_word("GROUP")
    target = p.variable()
    p.expect_word("FROM")
    return _stmt(first, "GET CONVERSATION GROUP", target=target, queue=p.dotted_name(),
                 timeout=0)


def receive(p: Parser) -> n.Stmt:
    first = p.advance()
    top = None
    if p.accept_word("TOP"):
        top = p.expression()
    items = [p.select_item()]
    while p.accept_op(","):
        items.append(p.select_item())
    p.expect_word("FROM")
    queue_name = p.dotted_name()
    into = p.variable() if p.accept_word("INTO") else None
    where: tuple[str, n.Expr] | None = None
    if p.accept_word("WHERE"):
        column = p.name().lower()
        if column not in ("conversation_handle", "conversation_group_id"):
            raise p.unsupported(f"RECEIVE ... WHERE {column}")
        p.expect_op("=")
        where = (column, p.expression())
    return _stmt(first, "RECEIVE", top=top, items=tuple(items), queue=queue_name, into=into,
                 where=where, timeout=0)


def waitfor_receive(p: Parser) -> n.Stmt:
    first = p.advance()
    p.expect_op("(")
    if p.tok.is_word("RECEIVE"):
        inner = receive(p)
    elif p.tok.is_word("GET"):
        inner = get_group(p)
    else:
        raise p.unsupported(f"WAITFOR ({p.tok.value.upper()} ...)")
    p.expect_op(")")
    timeout: n.Expr | None = None  # wait for ever
    if p.accept_op(","):
        p.expect_word("TIMEOUT")
        timeout = p.expression()
    assert isinstance(inner, n.Broker)
    args = dict(inner.args, timeout=timeout, waiting=True)
    return n.Broker(first.line, first.column, inner.verb, args)


BEGIN_RULES: dict[str, Rule] = {"DIALOG": begin_dialog, "CONVERSATION": begin_timer}
RULES: dict[str, Rule] = {"SEND": send, "RECEIVE": receive, "GET": get_group,
                          "MOVE": move, "END": end_conversation}
