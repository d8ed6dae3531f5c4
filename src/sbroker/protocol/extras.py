"""Optional fields of a message's first fragment (after its header): the fragment's flag
``HAS_EXTRA``, then a u16 length and that many bytes of (tag u8, length u16, value)
entries. A reader skips the tags it does not know, so a field added later costs a reader of
this format nothing; a fragment with no optional field is encoded as before they existed.
"""

from __future__ import annotations

import struct

from sbroker.protocol.errors import RemoteProtocolError

HAS_EXTRA = 4  # in a fragment's flags byte
MAX_TRACE = 512  # bytes of a trace context field
TAG_TRACE = 1  # value: the W3C traceparent of the message's SEND, ASCII
_TLV = struct.Struct("!BH")
_U16 = struct.Struct("!H")


def extras(trace: str) -> bytes:
    """The optional fields block carrying ``trace``."""
    value = trace.encode("ascii", "replace")
    entry = _TLV.pack(TAG_TRACE, len(value)) + value
    return _U16.pack(len(entry)) + entry


def extras_at(body: bytes, pos: int) -> tuple[str | None, int]:
    """The trace context in the optional fields block at ``pos`` (None when absent; unknown
    tags skipped) and where the block ends."""
    (n,) = _U16.unpack_from(body, pos)
    pos += 2
    end = pos + n
    if end > len(body):
        raise RemoteProtocolError("frame body truncated")
    trace = None
    while pos < end:
        tag, size = _TLV.unpack_from(body, pos)
        pos += _TLV.size
        if pos + size > end:
            raise RemoteProtocolError("bad optional field")
        if tag == TAG_TRACE:
            if size > MAX_TRACE:
                raise RemoteProtocolError("trace context too long")
            trace = body[pos:pos + size].decode("ascii")
        pos += size
    return trace, end


class PeerFields:
    """Whether to send optional fields to one peer, learnt from how its connections end.

    A broker older than the fields fails on a fragment that carries them: it drops the
    connection without a Close frame and says nothing more. So a connection lost while a
    message whose first fragment carried them was unacknowledged is a doubt; optional fields
    stop for good (this process) at the first doubt about a peer never seen reading them, at
    the second in a row about one that has (its crash or restart costs no trace; an old
    build put back in its place is still caught). Seen reading them: it acknowledged such a
    message, or sent one itself. Without the fields a fragment is what old peers read.
    """

    __slots__ = ("_doubts", "_seen", "on")

    def __init__(self) -> None:
        self.on = True
        self._seen = False
        self._doubts = 0

    def seen(self) -> None:
        """The peer read (or wrote) optional fields."""
        self._seen = True
        self._doubts = 0

    def doubt(self) -> None:
        """A connection was lost while a message sent with optional fields was unacknowledged."""
        self._doubts += 1
        if self._doubts >= (2 if self._seen else 1):
            self.on = False
