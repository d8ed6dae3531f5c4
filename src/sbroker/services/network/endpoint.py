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
