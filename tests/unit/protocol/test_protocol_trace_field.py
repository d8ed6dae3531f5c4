"""The optional trace context of a message's first fragment (docs/tracing.md): a fragment
without it is encoded exactly as before the field existed (so a peer that does not send it sends
what a newer peer reads as "no context"), one with it round-trips, and optional fields a reader
does not know are skipped."""

from __future__ import annotations

import struct
from uuid import UUID

import pytest

from sbroker.protocol.errors import RemoteProtocolError
from sbroker.protocol.frames import DialogKey, Fragment, MessageHeader, decode_body, encode_body

KEY = DialogKey(UUID(int=7), True)
HEADER = MessageHeader("DEFAULT", "SvcA", "SvcB", "DEFAULT", 5)
TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
TYPE = 6  # FrameType.FRAGMENT


def _old_encoding(frag: Fragment) -> bytes:
    """A fragment as peers wrote it before the field: acks, key, flags 0..3, the rest."""
    head = struct.pack("!16sBQII", KEY.conversation_id.bytes, 1 | 2, frag.seq, 0, 1)
    body = encode_body(Fragment(KEY, frag.seq, 0, 1, frag.payload, HEADER))
    return body[:2] + head + body[2 + len(head):]


def test_a_fragment_without_context_is_encoded_as_before_and_reads_as_none() -> None:
    plain = Fragment(KEY, 3, 0, 1, b"hello", HEADER)
    assert encode_body(plain) == _old_encoding(plain)
    decoded = decode_body(TYPE, _old_encoding(plain))
    assert isinstance(decoded, Fragment) and decoded.trace is None
    assert decoded.payload == b"hello"


def test_a_fragment_with_context_round_trips_and_keeps_its_body() -> None:
    frag = Fragment(KEY, 3, 0, 1, b"hello", HEADER, (), TRACE)
    decoded = decode_body(TYPE, encode_body(frag))
    assert decoded == frag


def test_unknown_optional_fields_are_skipped() -> None:
    plain = encode_body(Fragment(KEY, 3, 0, 1, b"hello", HEADER))
    head_end = 2 + struct.calcsize("!16sBQII")
    header_end = len(plain) - len(b"hello")
    future = struct.pack("!BH", 9, 3) + b"xyz" + struct.pack("!BH", 1, len(TRACE)) + \
        TRACE.encode()
    body = bytearray(plain[:header_end] + struct.pack("!H", len(future)) + future + b"hello")
    body[2 + 16] |= 4  # the flag: optional fields follow the header
    decoded = decode_body(TYPE, bytes(body))
    assert isinstance(decoded, Fragment)
    assert (decoded.trace, decoded.payload) == (TRACE, b"hello")
    assert head_end < header_end


@pytest.mark.parametrize("extra", [b"\x00\x05\x01\x00\x09", b"\x00\x02\x01", b"\x00"])
def test_a_cut_optional_field_is_a_remote_error(extra: bytes) -> None:
    body = bytearray(encode_body(Fragment(KEY, 3, 0, 1, b"", HEADER)) + extra)
    body[2 + 16] |= 4
    with pytest.raises(RemoteProtocolError):
        decode_body(TYPE, bytes(body))
