"""CREATE / ALTER / DROP ENDPOINT ... FOR SERVICE_BROKER on sbroker's one broker endpoint
(SPEC §7): the options kept in the broker database, which the network service runs
(``STATE = STARTED``) when the broker starts, or at once when it already runs."""

from __future__ import annotations

import os
from typing import Any

from sbroker.apps.tsql.errors import UNSUPPORTED, USER, TSqlError
from sbroker.apps.tsql.evaluate import evaluate
from sbroker.apps.tsql.nodes import Expr
from sbroker.apps.tsql.session import Frame
from sbroker.services.network.config import EndpointConfig

#: Where the shared secret of the brokers comes from: T-SQL has no way to write one.
SECRET_VARIABLE = "SBROKER_ENDPOINT_SECRET"
ENDPOINT_EXISTS = 7862
NOT_FOUND = 15151


def _int(frame: Frame, value: Any, what: str) -> int:
    value = evaluate(value, frame) if isinstance(value, Expr) else value
    try:
        return int(value)
    except (TypeError, ValueError):
        raise TSqlError(f"{what} must be a number, not {value!r}", 102, 15) from None


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


def options(frame: Frame, opts: dict[str, Any]) -> dict[str, Any]:
    """The ``create_endpoint`` / ``alter_endpoint`` options that the T-SQL options name."""
    out: dict[str, Any] = _secret(opts)
    if "STATE" in opts:
        out["state"] = str(opts["STATE"]).lower()
    if "LISTENER_PORT" in opts:
        port = _int(frame, opts["LISTENER_PORT"], "LISTENER_PORT")
        if not 0 <= port < 65536:
            raise TSqlError(f"LISTENER_PORT = {port} is not a TCP port (0 to 65535; 0: any"
                            " free port)", 102, 15)
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


def create(frame: Frame, a: dict[str, Any]) -> None:
    broker = frame.session.broker
    if broker.network.endpoint() is not None:
        raise TSqlError("An endpoint of the requested type already exists. Only one endpoint"
                        " of this type is supported. Use ALTER ENDPOINT or DROP the existing"
                        " endpoint and execute the CREATE ENDPOINT statement.",
                        ENDPOINT_EXISTS, 16)
    opts = a["options"]
    if "LISTENER_PORT" not in opts:
        raise TSqlError("CREATE ENDPOINT needs AS TCP (LISTENER_PORT = n)", 102, 15)
    cfg = {"host": "0.0.0.0", "state": "stopped", **options(frame, opts), "name": a["name"]}
    _startable(a["name"], cfg, None)
    broker.create_endpoint(**cfg)


def alter(frame: Frame, a: dict[str, Any]) -> None:
    current = _named(frame, "alter", a["name"])
    cfg = options(frame, a["options"])
    _startable(a["name"], cfg, current)
    if cfg:
        frame.session.broker.alter_endpoint(**cfg)


def drop(frame: Frame, name: str) -> None:
    _named(frame, "drop", name)
    frame.session.broker.drop_endpoint()
