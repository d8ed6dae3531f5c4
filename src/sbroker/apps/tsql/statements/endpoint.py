"""CREATE / ALTER / DROP ENDPOINT ... FOR SERVICE_BROKER on sbroker's one broker endpoint
(docs/tsql.md, "The broker endpoint"): the options kept in the broker database, which the
network service runs (``STATE = STARTED``) when the broker starts, or at once when it
already runs."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sbroker.apps.tsql.errors import (
    ENDPOINT_EXISTS,
    NOT_FOUND,
    UNSUPPORTED,
    USER,
    TSqlError,
    bad_value,
)
from sbroker.apps.tsql.session import Frame
from sbroker.apps.tsql.statement import Head, Parser, Statement, statement
from sbroker.apps.tsql.statements.options import authorization, value
from sbroker.apps.tsql.tokens import Kind
from sbroker.services.network.config import EndpointConfig

#: Where the shared secret of the brokers comes from: T-SQL has no way to write one.
SECRET_VARIABLE = "SBROKER_ENDPOINT_SECRET"


@statement("CREATE ENDPOINT")
@dataclass(frozen=True)
class CreateEndpoint(Statement):
    """``CREATE | ALTER ENDPOINT name [STATE = ...] [AS TCP (...)] [FOR SERVICE_BROKER
    (...)]``; the options are kept as written, mapped when it runs (``settings``)."""
    name: str
    options: dict[str, Any] = field(hash=False)

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        name = p.name()
        authorization(p)
        opts: dict[str, Any] = {}
        if p.accept_word("STATE"):
            p.expect_op("=")
            opts["STATE"] = p.expect_word("STARTED", "STOPPED", "DISABLED").upper
        if p.accept_word("AS"):
            if not p.tok.is_word("TCP"):
                raise p.unsupported(f"ENDPOINT AS {p.tok.value.upper()}")
            p.advance()
            opts.update(_endpoint_options(p, _tcp_option))
        if head.words[0] == "CREATE" or p.tok.is_word("FOR"):
            p.expect_word("FOR")
            if not p.tok.is_word("SERVICE_BROKER"):
                raise p.unsupported(f"ENDPOINT FOR {p.tok.value.upper()}")
            p.advance()
            if p.tok.is_op("("):
                opts.update(_endpoint_options(p, _broker_option))
        return cls(head.line, head.column, name, opts)

    def run(self, frame: Frame) -> None:
        broker = frame.session.broker
        if broker.network.endpoint() is not None:
            raise TSqlError("An endpoint of the requested type already exists. Only one"
                            " endpoint of this type is supported. Use ALTER ENDPOINT or DROP"
                            " the existing endpoint and execute the CREATE ENDPOINT"
                            " statement.", ENDPOINT_EXISTS, 16)
        if "LISTENER_PORT" not in self.options:
            raise bad_value("CREATE ENDPOINT needs AS TCP (LISTENER_PORT = n)")
        cfg = {"host": "0.0.0.0", "state": "stopped", **settings(frame, self.options),
               "name": self.name}
        _startable(self.name, cfg, None)
        broker.create_endpoint(**cfg)


@statement("ALTER ENDPOINT")
@dataclass(frozen=True)
class AlterEndpoint(CreateEndpoint):
    """Changes the options it names."""

    def run(self, frame: Frame) -> None:
        current = _named(frame, "alter", self.name)
        cfg = settings(frame, self.options)
        _startable(self.name, cfg, current)
        if cfg:
            frame.session.broker.alter_endpoint(**cfg)


@statement("DROP ENDPOINT")
@dataclass(frozen=True)
class DropEndpoint(Statement):
    name: str

    @classmethod
    def parse(cls, p: Parser, head: Head) -> Statement:
        return cls(head.line, head.column, p.name())

    def run(self, frame: Frame) -> None:
        _named(frame, "drop", self.name)
        frame.session.broker.drop_endpoint()


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


def _int(frame: Frame, option: Any, what: str) -> int:
    number = value(frame, option)
    try:
        return int(number)
    except (TypeError, ValueError):
        raise bad_value(f"{what} must be a number, not {number!r}") from None


def _secret(opts: dict[str, Any]) -> dict[str, Any]:
    """AUTHENTICATION: WINDOWS is refused; CERTIFICATE (or none) means sbroker's shared
    secret, read from the environment of the process that runs the statement."""
    methods = opts.get("AUTHENTICATION") or {}
    if "WINDOWS" in methods:
        raise TSqlError("AUTHENTICATION = WINDOWS is not supported by sbroker (no Windows"
                        " accounts): use AUTHENTICATION = CERTIFICATE name, with the brokers'"
                        f" shared secret in the environment variable {SECRET_VARIABLE}",
                        UNSUPPORTED, 16)
    secret = os.environ.get(SECRET_VARIABLE)
    return {} if not secret else {"secret": secret}


def settings(frame: Frame, opts: dict[str, Any]) -> dict[str, Any]:
    """The ``create_endpoint`` / ``alter_endpoint`` options that the T-SQL options name."""
    out: dict[str, Any] = _secret(opts)
    if "STATE" in opts:
        out["state"] = str(opts["STATE"]).lower()
    if "LISTENER_PORT" in opts:
        port = _int(frame, opts["LISTENER_PORT"], "LISTENER_PORT")
        if not 0 <= port < 65536:
            raise bad_value(f"LISTENER_PORT = {port} is not a TCP port (0 to 65535; 0: any"
                            " free port)")
        out["port"] = port
    if "LISTENER_IP" in opts:
        ip = str(opts["LISTENER_IP"])
        out["host"] = "0.0.0.0" if ip == "ALL" else ip
    if "ENCRYPTION" in opts:
        out["encryption"] = str(opts["ENCRYPTION"]).lower()
    if "MESSAGE_FORWARDING" in opts:
        out["message_forwarding"] = opts["MESSAGE_FORWARDING"] == "ENABLED"
    if "MESSAGE_FORWARD_SIZE" in opts:
        out["message_forward_size"] = _int(frame, opts["MESSAGE_FORWARD_SIZE"],
                                           "MESSAGE_FORWARD_SIZE")
    return out


def _startable(name: str, cfg: dict[str, Any], current: EndpointConfig | None) -> None:
    """An endpoint to start needs the secret (or certificates set through Python)."""
    if cfg.get("state", current.state if current else "stopped") != "started":
        return
    if cfg.get("secret") or (current is not None and (current.secret or current.certificate)):
        return
    raise TSqlError(f"endpoint '{name}' cannot start: peers authenticate with the brokers'"
                    f" shared secret; set the environment variable {SECRET_VARIABLE}", USER, 16)


def _named(frame: Frame, verb: str, name: str) -> EndpointConfig:
    current = frame.session.broker.network.endpoint()
    if current is None or current.name not in (None, name):
        raise TSqlError(f"Cannot {verb} the endpoint '{name}', because it does not exist or"
                        " you do not have permission.", NOT_FOUND, 16)
    return current
