"""Protocol errors, split by who broke the rule (as h11 does).

A `LocalProtocolError` means this process misused the core (a bug in the caller); a
`RemoteProtocolError` means the bytes that arrived break the protocol. Decoding arbitrary
bytes only ever raises `RemoteProtocolError` or its subclasses. A failed integrity check or
authentication is not an exception: it is counted, or reported as an event.
"""

from __future__ import annotations

__all__ = [
    "FramingError",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
]


class ProtocolError(Exception):
    """Base of every error raised by `sbroker.protocol`."""


class LocalProtocolError(ProtocolError):
    """The local caller asked for something the protocol does not allow."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol does not allow."""


class FramingError(RemoteProtocolError):
    """The byte stream cannot be split into frames any more; the connection must close."""
