"""The broker endpoint (docs/network.md): its options, stored in a table of its own (one row),
and which session runs it."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sbroker.core.errors import DuplicateError, InvalidArgumentError, NotFoundError
from sbroker.engine.definitions import check
from sbroker.storage.ports import Connection

ENCRYPTION = ("required", "supported", "disabled")
#: ``started`` runs the listener and transmitter when the broker starts; ``stopped`` and
#: ``disabled`` (T-SQL's STATE = STOPPED / DISABLED) keep the endpoint defined but not run.
STATES = ("started", "stopped", "disabled")
#: Extra keyword options of create_endpoint / alter_endpoint (protocol and transmitter tunables).
TUNABLES: dict[str, type] = {
    "fragment_size": int,  # bytes per fragment (default 32 KiB)
    "retry_initial": float,  # first retransmission after this many seconds (2-3 s default)
    "retry_max": float,  # backoff cap (60 s default)
    "idle_timeout": float,  # close an idle connection after this many seconds (90 s)
    "starvation_seconds": float,  # a waiting low-priority message goes first after this long
    "max_in_flight": int,  # messages handed to the protocol core but not yet acknowledged
}

@dataclass(frozen=True)
class EndpointConfig:
    """The options of `broker.create_endpoint`."""

    host: str = "127.0.0.1"
    port: int = 4022
    secret: str | None = None
    certificate: str | None = None
    private_key: str | None = None
    ca: str | None = None
    encryption: str = "required"
    message_forwarding: bool = False
    message_forward_size: int = 10  # megabytes held for forwarding at most
    tunables: dict[str, Any] = field(default_factory=dict)
    state: str = "started"
    name: str | None = None  # T-SQL's endpoint name (CREATE ENDPOINT name)

    def __post_init__(self) -> None:
        if not isinstance(self.host, str) or not self.host:
            raise InvalidArgumentError("endpoint host must be a non-empty string")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not (
            0 <= self.port < 65536
        ):
            raise InvalidArgumentError("endpoint port must be an int from 0 to 65535")
        if self.encryption not in ENCRYPTION:
            raise InvalidArgumentError(
                f"encryption {self.encryption!r}: use 'required', 'supported' or 'disabled'"
            )
        if self.state not in STATES:
            raise InvalidArgumentError(
                f"endpoint state {self.state!r}: use 'started', 'stopped' or 'disabled'")
        certs = (self.certificate, self.private_key, self.ca)
        if any(certs) and not all(certs):
            raise InvalidArgumentError("certificate, private_key and ca go together")
        for path in certs:
            if path is not None and not Path(path).is_file():
                raise InvalidArgumentError(f"endpoint certificate file {path!r} does not exist")
        if self.secret is not None and not self.secret:
            raise InvalidArgumentError("the endpoint secret must not be empty")
        if not isinstance(self.message_forward_size, int) or self.message_forward_size < 1:
            raise InvalidArgumentError("message_forward_size is a number of megabytes >= 1")
        for name, value in self.tunables.items():
            kind = TUNABLES.get(name)
            if kind is None:
                raise InvalidArgumentError(
                    f"unknown endpoint option {name!r}: use {', '.join(sorted(TUNABLES))}"
                )
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise InvalidArgumentError(f"endpoint option {name} must be a number > 0")

    def check_startable(self) -> None:
        """An endpoint with neither a secret nor certificates refuses to start."""
        if self.secret is None and self.certificate is None:
            raise InvalidArgumentError(
                "the broker endpoint has neither a secret nor certificates: peers could not be "
                "authenticated; use alter_endpoint(secret=...) or certificate/private_key/ca"
            )

    def tunable(self, name: str, default: float) -> float:
        return float(self.tunables.get(name, default))


def _options(raw: dict[str, Any]) -> EndpointConfig:
    known = {f for f in EndpointConfig.__dataclass_fields__ if f != "tunables"}
    base = {k: v for k, v in raw.items() if k in known}
    tunables = {k: v for k, v in raw.items() if k not in known and k != "tunables"}
    tunables.update(raw.get("tunables") or {})
    secret = base.get("secret")
    if isinstance(secret, bytes):
        base["secret"] = secret.decode("utf-8", "surrogateescape")
    for key in ("certificate", "private_key", "ca"):
        if base.get(key) is not None:
            base[key] = str(base[key])
    return EndpointConfig(**base, tunables=tunables)


# The endpoint's row: each function runs inside a write transaction of the engine.
def load(conn: Connection) -> EndpointConfig | None:
    """The configured endpoint, or None."""
    row = conn.query_one(conn.sql.endpoint_options)
    return None if row is None else _options(json.loads(row[0]))


def _save(conn: Connection, cfg: EndpointConfig) -> None:
    conn.execute(conn.sql.save_endpoint_options, (json.dumps(asdict(cfg)),))


def create(host: str, port: int, options: dict[str, Any]) -> Callable[[Connection], None]:
    cfg = _options({"host": host, "port": port, **options})

    def ddl(conn: Connection) -> None:
        if load(conn) is not None:
            raise DuplicateError("the broker endpoint already exists: use alter_endpoint")
        _save(conn, cfg)

    return ddl


def same(conn: Connection, host: str, port: int, options: dict[str, Any]) -> bool:
    """For ``create_endpoint(exist_ok=True)``: False when there is no endpoint, True when
    it has these options, a DuplicateError saying what differs otherwise."""
    current = load(conn)
    if current is None:
        return False
    asked = asdict(_options({"host": host, "port": port, **options}))
    return check("the broker endpoint", asdict(current), asked, secret=frozenset({"secret"}))


def alter(options: dict[str, Any]) -> Callable[[Connection], EndpointConfig]:
    def ddl(conn: Connection) -> EndpointConfig:
        current = load(conn)
        if current is None:
            raise NotFoundError("there is no broker endpoint: use create_endpoint first")
        raw = asdict(current)
        tunables = dict(raw.pop("tunables"))
        for key, value in options.items():
            if key in raw:
                raw[key] = value
            else:
                tunables[key] = value
        cfg = _options({**raw, "tunables": tunables})
        _save(conn, cfg)
        return cfg

    return ddl


def drop(conn: Connection) -> None:
    if load(conn) is None:
        raise NotFoundError("there is no broker endpoint to drop")
    conn.execute(conn.sql.drop_endpoint_row)


def claim(session_id: int) -> Callable[[Connection], bool]:
    """Make this session the one that runs the endpoint, unless a live session already does
    (one listener and one transmitter per database, however many processes open it; the
    sessions of dead processes are reaped before)."""
    def run(conn: Connection) -> bool:
        row = conn.query_one(conn.sql.endpoint_owner)
        owner = None if row is None else row[0]
        if owner is not None and owner != session_id and conn.query_one(
                conn.sql.session_exists, (owner,)) is not None:
            return False
        conn.execute(conn.sql.set_endpoint_owner, (session_id,))
        return True

    return run


def release(session_id: int) -> Callable[[Connection], object]:
    return lambda conn: conn.execute(conn.sql.release_endpoint, (session_id,))


def set_listening_port(port: int | None) -> Callable[[Connection], object]:
    return lambda conn: conn.execute(conn.sql.set_listening_port, (port,))


