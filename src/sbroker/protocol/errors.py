"""Protocol errors, split by who broke the rule (as h11 does).

A `LocalProtocolError` means this process misused the core (a bug in the caller); a
`RemoteProtocolError` means the bytes that arrived break the protocol. Decoding arbitrary
bytes only ever raises `RemoteProtocolError` or its subclasses.
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "FramingError",
    "IntegrityError",
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


class IntegrityError(RemoteProtocolError):
    """A frame's keyed integrity check failed: corrupted or forged, so it is dropped."""


class AuthenticationError(RemoteProtocolError):
    """The peer could not prove knowledge of the shared secret, or was not the expected one."""
