"""Sans-IO broker-to-broker protocol: the dialog layer (exactly-once-in-order delivery) above
the adjacent-broker layer (authenticated, integrity-checked frames over one connection).

`Session` is one connection (handshake, frames, keepalive, idle close); `DialogEngine` is the
dialog state toward one peer broker instance and outlives connections. Neither does I/O,
reads a clock or draws randomness by itself: bytes, `now` and a `random.Random` are passed in.
"""

from __future__ import annotations

from sbroker.protocol.dialog import DialogEngine
from sbroker.protocol.errors import (
    FramingError,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
)
from sbroker.protocol.events import (
    AuthenticationFailed,
    ConnectionClosed,
    DialogEvent,
    Established,
    Message,
    MessageAcked,
    MessageReceived,
    SessionEvent,
)
from sbroker.protocol.frames import DialogKey
from sbroker.protocol.inbound import PartialMessage
from sbroker.protocol.outbound import DialogConfig
from sbroker.protocol.session import (
    Phase,
    Session,
    SessionConfig,
    SessionStats,
)

__all__ = [
    "AuthenticationFailed",
    "ConnectionClosed",
    "DialogConfig",
    "DialogEngine",
    "DialogEvent",
    "DialogKey",
    "Established",
    "FramingError",
    "LocalProtocolError",
    "Message",
    "MessageAcked",
    "MessageReceived",
    "PartialMessage",
    "Phase",
    "ProtocolError",
    "RemoteProtocolError",
    "Session",
    "SessionConfig",
    "SessionEvent",
    "SessionStats",
]
