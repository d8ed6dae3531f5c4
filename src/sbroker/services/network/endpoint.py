"""The endpoint of an instance: where it listens, how its peers authenticate (shared secret
and/or mutual TLS), and what the transport needs from the broker engine.

`encryption`: "disabled" never uses TLS (a secret is then required); "required" and
"supported" use mutual TLS whenever certificates are configured ("required" insists on them).
TLS is negotiated by configuration, not in band: both ends of a route must agree.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import Literal, Protocol
from uuid import UUID

from sbroker.protocol.errors import LocalProtocolError
from sbroker.protocol.events import Message, MessageAcked
from sbroker.protocol.frames import DialogKey
from sbroker.protocol.outbound import DialogConfig

__all__ = ["Address", "Encryption", "TransportConfig", "TransportHandler"]

Address = tuple[str, int]
Encryption = Literal["required", "supported", "disabled"]


class TransportHandler(Protocol):
    """What the broker engine provides to the transport (called on the loop thread, but
    `deliver`, which one applier thread calls, in order)."""

    def deliver(self, peer: UUID, messages: list[Message]) -> None:
        """Durably enqueue (or forward) `messages`, in order; raise to refuse them for now."""

    def acked(self, peer: UUID, acks: list[MessageAcked]) -> None:
        """The peer durably holds these: delete them from the transmission queue."""

    def receive_state(self, key: DialogKey) -> int:
        """The durable next expected seq of a dialog direction (0 when never seen)."""

    def connection_failed(self, address: Address, reason: str) -> None:
        """A connection could not be made or was refused (for transmission_status)."""


@dataclass(frozen=True)
class TransportConfig:
    """The endpoint: where to listen, how peers authenticate, and the protocol tunables."""

    instance: UUID
    host: str = "127.0.0.1"
    port: int = 4022
    secret: bytes | None = None
    certificate: str | None = None
    private_key: str | None = None
    ca: str | None = None
    encryption: Encryption = "required"
    dialog: DialogConfig = field(default_factory=DialogConfig)
    idle_timeout: float = 90.0
    handshake_timeout: float = 10.0
    reconnect_min: float = 1.0
    reconnect_max: float = 30.0
    certificates_from_secret: bool = False  # the TLS certificates were derived from the secret

    def __post_init__(self) -> None:
        certs = (self.certificate, self.private_key, self.ca)
        if any(certs) and not all(certs):
            raise LocalProtocolError("certificate, private_key and ca go together")
        if self.secret is None and not self.tls:
            raise LocalProtocolError("an endpoint needs a secret or certificates with TLS")
        if self.encryption == "required" and not all(certs):
            raise LocalProtocolError("encryption='required' needs certificate, key and ca")

    @property
    def tls(self) -> bool:
        """TLS is used when certificates are configured and encryption is not disabled."""
        return self.encryption != "disabled" and self.certificate is not None

    def contexts(self) -> tuple[ssl.SSLContext, ssl.SSLContext] | None:
        """(server, client) contexts for mutual TLS, or None without TLS."""
        if not self.tls:
            return None
        assert self.certificate and self.private_key and self.ca
        server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=self.ca)
        server.verify_mode = ssl.CERT_REQUIRED
        client = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.ca)
        client.check_hostname = False  # peers are known by certificate, not by host name
        for ctx in (server, client):
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            ctx.load_cert_chain(self.certificate, self.private_key)
        return server, client


def tls_failure(exc: BaseException, address: Address, *, from_secret: bool,
                accepting: bool = False) -> str:
    """What a failed TLS handshake with ``address`` means, in words an operator acts on."""
    where = f"{address[0]}:{address[1]}"
    text = str(exc).upper()
    closed = isinstance(exc, ConnectionResetError | ConnectionAbortedError | ssl.SSLEOFError) or (
        "EOF" in text)
    if accepting and closed:  # a client that refuses our certificate just hangs up
        cause = ("the two endpoints' secrets differ" if from_secret
                 else "it does not accept this endpoint's certificate")
        return (f"authentication failed for a peer at {where}: it left during the TLS"
                f" handshake, as a broker does when {cause} (or its encryption setting does)")
    if isinstance(exc, ssl.SSLCertVerificationError) or "ALERT" in text or (
            "CERTIFICATE" in text):
        if from_secret:
            return (f"authentication failed with {where}: the two endpoints' secrets differ"
                    " (their TLS certificates are derived from the secret): give both"
                    " endpoints the same secret")
        reason = getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or exc
        return (f"authentication failed with {where}: the peer's certificate was refused"
                f" ({reason}): check that each endpoint's ca signs the other's certificate")
    if "WRONG_VERSION_NUMBER" in text or closed:
        return (f"TLS handshake with {where} failed: the peer does not speak TLS (or hung"
                " up): both endpoints need the same encryption setting")
    return f"TLS handshake with {where} failed: {exc}"


def auth_failure(address: Address, reason: str) -> str:
    """A session's authentication failure (the protocol's words), with the peer's address."""
    rest = reason.split("authentication failed", 1)[-1].lstrip(": ")
    return f"authentication failed with {address[0]}:{address[1]}: {rest}"


def refused_row(connection_id: int, address: Address, wall: float,
                reason: str) -> dict[str, object]:
    """The ``dm_broker_connections`` row of a peer refused before it had a session."""
    return {"connection_id": connection_id, "peer": f"{address[0]}:{address[1]}",
            "peer_instance": None, "is_accept": True, "state_desc": "CLOSED",
            "connect_time": wall, "login_time": None, "last_activity_time": wall,
            "authentication_method": "CERTIFICATE", "encryption_algorithm_desc": None,
            "total_fragments_sent": 0, "total_fragments_received": 0, "total_bytes_sent": 0,
            "total_bytes_received": 0, "corrupt_fragments": 0, "last_error": reason}
