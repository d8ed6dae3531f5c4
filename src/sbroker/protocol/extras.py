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
