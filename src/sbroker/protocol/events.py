"""What crosses the boundary between the core and its caller: messages and events.

All are frozen dataclasses that validate themselves; the caller hands `Message`s in and gets
events out (h11 style).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias
from uuid import UUID

from sbroker.protocol.errors import LocalProtocolError
from sbroker.protocol.frames import DialogKey, MessageHeader, dialog_key

__all__ = [
    "AuthenticationFailed",
    "ConnectionClosed",
    "DialogEvent",
    "Established",
    "Message",
    "MessageAcked",
    "MessageReceived",
    "SessionEvent",
]


_HEADERS: dict[tuple[object, ...], MessageHeader] = {}  # built and validated once per kind
_HEADERS_MAX = 4096


@dataclass(frozen=True, slots=True)
class Message:
    """One sequenced dialog message, as sent and as received (also what a forwarder relays).

    `from_initiator` tells the direction: True when the initiator of the conversation sent it.
    `seq` is the message_sequence_number, counted per conversation and direction from 0.
    """

    conversation_id: UUID
    from_initiator: bool
    seq: int
    message_type: str
    body: bytes
    from_service: str
    to_service: str
    contract: str = "DEFAULT"
    priority: int = 5
    origin_instance: UUID | None = None
    target_instance: UUID | None = None
    expires_at: float | None = None
    trace_context: str | None = None  # the W3C traceparent of its SEND, when traced
    _key: DialogKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.body, bytes):
            raise LocalProtocolError("body must be bytes")
        if not 0 <= self.seq < 2**64:
            raise LocalProtocolError("seq out of range")
        if not isinstance(self.conversation_id, UUID):
            raise LocalProtocolError("conversation_id must be a UUID")
        if not isinstance(self.from_initiator, bool):
            raise LocalProtocolError("from_initiator must be a bool")
        # names, priority and instances are checked where the header is built (once per
        # transmission); a received message was checked when its header was decoded.
        object.__setattr__(self, "_key", dialog_key(self.conversation_id, self.from_initiator))

    @property
    def key(self) -> DialogKey:
        """The dialog direction this message belongs to."""
        return self._key

    def header(self) -> MessageHeader:
        """The header fragment 0 carries; validated, and shared by messages that agree."""
        fields = (
            self.message_type,
            self.from_service,
            self.to_service,
            self.contract,
            len(self.body),
            self.priority,
            self.origin_instance,
            self.target_instance,
            self.expires_at,
        )
        header = _HEADERS.get(fields)
        if header is None:
            header = MessageHeader(*fields)
            if len(_HEADERS) >= _HEADERS_MAX:
                _HEADERS.clear()
            _HEADERS[fields] = header
        return header

    @classmethod
    def from_header(cls, key: DialogKey, seq: int, header: MessageHeader, body: bytes,
                    trace_context: str | None = None) -> Message:
        return cls(
            key.conversation_id,
            key.from_initiator,
            seq,
            header.message_type,
            body,
            header.from_service,
            header.to_service,
            header.contract,
            header.priority,
            header.origin_instance,
            header.target_instance,
            header.expires_at,
            trace_context,
        )


@dataclass(frozen=True, slots=True)
class MessageReceived:
    """A complete message arrived in order; enqueue it durably, then call `message_persisted`."""

    message: Message


@dataclass(frozen=True, slots=True)
class MessageAcked:
    """The peer durably holds this message: delete it from the transmission queue."""

    key: DialogKey
    seq: int


@dataclass(frozen=True, slots=True)
class Established:
    """The handshake succeeded; `peer_instance` is the authenticated broker instance."""

    peer_instance: UUID
    initiator: bool


@dataclass(frozen=True, slots=True)
class AuthenticationFailed:
    """The peer was refused (or refused us); `by_peer` tells which side said no."""

    reason: str
    by_peer: bool


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The connection is over: the caller closes the socket. `error` is None when orderly."""

    reason: str
    error: str | None = None


DialogEvent: TypeAlias = MessageReceived | MessageAcked
SessionEvent: TypeAlias = Established | AuthenticationFailed | ConnectionClosed
