"""Frames and their envelope: round trips, validation, and decoding of hostile bytes."""

from __future__ import annotations

import contextlib
import struct
import zlib
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sbroker.protocol import (
    DialogKey,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
)
from sbroker.protocol.errors import FramingError
from sbroker.protocol.frames import (
    Accept,
    Ack,
    AckEntry,
    AuthMode,
    Challenge,
    Close,
    Fragment,
    Frame,
    FrameType,
    Hello,
    Keepalive,
    MessageHeader,
    Proof,
    Refuse,
    decode_body,
    encode_body,
)
from sbroker.protocol.framing import (
    HEADER_SIZE,
    MAC_SIZE,
    FrameDecoder,
    seal,
)

KEY = b"k" * 32
CONV = UUID(int=7)
DK = DialogKey(CONV, True)

EXAMPLES: list[Frame] = [
    Hello(UUID(int=1), b"n" * 32),
    Hello(UUID(int=1), b"n" * 32, AuthMode.TRANSPORT, UUID(int=2)),
    Challenge(UUID(int=2), b"m" * 32, b"p" * 32),
    Proof(b"q" * 32),
    Accept(),
    Refuse("no entry"),
    Fragment(
        DK,
        3,
        0,
        2,
        b"first half",
        MessageHeader("T", "from", "to", "C", 20, 7, UUID(int=3), None, 12.5),
        (AckEntry(DialogKey(CONV, False), 9),),
    ),
    Fragment(DK, 3, 1, 2, b"secondhalf"),
    Fragment(DialogKey(CONV, False), 2**64 - 1, 0, 1, b"", MessageHeader("ü名", "", "", "", 0)),
    Ack((AckEntry(DK, 0), AckEntry(DialogKey(UUID(int=9), False), 2**64 - 1))),
    Ack((AckEntry(DK, 4, held=0b1101), AckEntry(DialogKey(CONV, False), 1, held=2**64 - 1))),
    Keepalive(),
    Close("idle"),
]


@pytest.mark.parametrize("frame", EXAMPLES, ids=lambda f: type(f).__name__)
def test_every_frame_type_round_trips_through_its_body(frame: Frame) -> None:
    assert decode_body(frame.TYPE, encode_body(frame)) == frame


@pytest.mark.parametrize("frame", EXAMPLES, ids=lambda f: type(f).__name__)
def test_sealed_frames_are_cut_from_a_stream_byte_by_byte(frame: Frame) -> None:
    data = seal(frame.TYPE, encode_body(frame), KEY) * 2
    dec = FrameDecoder()
    got = []
    for i in range(len(data)):
        dec.feed(data[i : i + 1])
        while (raw := dec.next_frame()) is not None:
            assert raw.verify(KEY)
            got.append(decode_body(raw.ftype, raw.body))
    assert got == [frame, frame]
    assert dec.buffered == 0


@pytest.mark.parametrize(
    "build",
    [
        lambda: Hello(UUID(int=1), b"short"),
        lambda: Challenge(UUID(int=1), b"n" * 32, b"p" * 31),
        lambda: Proof(b""),
        lambda: Fragment(DK, 0, 1, 1, b""),  # index beyond count
        lambda: Fragment(DK, 0, 0, 1, b""),  # fragment 0 without a header
        lambda: Fragment(DK, 0, 1, 2, b"", MessageHeader("T", "a", "b", "C", 0)),
        lambda: Fragment(DK, -1, 0, 1, b"", MessageHeader("T", "a", "b", "C", 0)),
        lambda: Ack(()),
        lambda: MessageHeader("T", "a", "b", "C", 0, priority=11),
        lambda: MessageHeader("T", "a", "b", "C", 0, expires_at=float("nan")),
        lambda: MessageHeader("x" * 5000, "a", "b", "C", 0),
        lambda: AckEntry(DK, -1),
        lambda: AckEntry(DK, 0, held=2**64),
        lambda: DialogKey("not a uuid", True),  # type: ignore[arg-type]
    ],
)
def test_invalid_frames_cannot_be_built(build: object) -> None:
    assert callable(build)
    with pytest.raises(LocalProtocolError):
        build()


def test_unknown_frame_type_and_trailing_bytes_are_remote_errors() -> None:
    with pytest.raises(RemoteProtocolError, match="unknown frame type"):
        decode_body(200, b"")
    with pytest.raises(RemoteProtocolError, match="trailing"):
        decode_body(FrameType.ACCEPT, b"x")
    with pytest.raises(RemoteProtocolError, match="truncated"):
        decode_body(FrameType.PROOF, b"x" * 31)
    # a syntactically complete fragment whose fields break the rules is a remote error too
    bad = encode_body(Fragment(DK, 0, 1, 2, b"x"))
    broken = bad[:2] + bad[2:27] + struct.pack("!II", 5, 2) + bad[35:]
    with pytest.raises(RemoteProtocolError, match="invalid FRAGMENT"):
        decode_body(FrameType.FRAGMENT, broken)


def test_a_gap_report_whose_bitmap_is_empty_or_cut_short_is_a_remote_error() -> None:
    plain = encode_body(Ack((AckEntry(DK, 4),)))
    flagged = plain[:18] + bytes([plain[18] | 2]) + plain[19:]  # "a bitmap follows"
    with pytest.raises(RemoteProtocolError):
        decode_body(FrameType.ACK, flagged + bytes(8))  # an all-zero bitmap
    with pytest.raises(RemoteProtocolError):
        decode_body(FrameType.ACK, flagged + bytes(4))


def test_damaged_header_is_a_framing_error() -> None:
    data = bytearray(seal(FrameType.KEEPALIVE, b"", KEY))
    data[6] ^= 0x01  # a bit of the length field
    dec = FrameDecoder()
    dec.feed(bytes(data))
    with pytest.raises(FramingError, match="damaged"):
        dec.next_frame()


def test_other_version_and_oversized_length_are_framing_errors() -> None:
    for version, length in ((2, 0), (1, 2**31)):
        head = struct.pack("!2sBBI", b"SB", version, FrameType.KEEPALIVE, length)
        dec = FrameDecoder()
        dec.feed(head + struct.pack("!I", zlib.crc32(head)))
        with pytest.raises(FramingError):
            dec.next_frame()


@settings(max_examples=300)
@given(st.sampled_from(EXAMPLES), st.data())
def test_any_flipped_bit_is_detected(frame: Frame, data: st.DataObject) -> None:
    sealed = seal(frame.TYPE, encode_body(frame), KEY)
    bit = data.draw(st.integers(0, len(sealed) * 8 - 1))
    damaged = bytearray(sealed)
    damaged[bit // 8] ^= 1 << (bit % 8)
    dec = FrameDecoder()
    dec.feed(bytes(damaged))
    try:
        raw = dec.next_frame()
    except FramingError:
        assert bit < HEADER_SIZE * 8  # only header damage breaks the framing
        return
    assert raw is not None
    assert not raw.verify(KEY)


def test_a_frame_sealed_with_another_key_does_not_verify() -> None:
    frame = EXAMPLES[6]
    forged = seal(frame.TYPE, encode_body(frame), b"attacker" * 4)
    dec = FrameDecoder()
    dec.feed(forged)
    raw = dec.next_frame()
    assert raw is not None and not raw.verify(KEY)
    assert len(forged) == HEADER_SIZE + len(encode_body(frame)) + MAC_SIZE


@settings(max_examples=500)
@given(st.integers(0, 255), st.binary(max_size=300))
def test_decoding_arbitrary_bodies_only_raises_protocol_errors(ftype: int, body: bytes) -> None:
    with contextlib.suppress(RemoteProtocolError):
        decode_body(ftype, body)


@settings(max_examples=300)
@given(st.sampled_from(EXAMPLES), st.binary(max_size=40), st.integers(0, 400))
def test_mutated_valid_bodies_only_raise_protocol_errors(
    frame: Frame, noise: bytes, at: int
) -> None:
    body = encode_body(frame)
    at = min(at, len(body))
    for mutated in (body[:at] + noise + body[at:], body[:at] + noise, body[:at]):
        with contextlib.suppress(RemoteProtocolError):
            decode_body(frame.TYPE, mutated)


_names = st.text(max_size=12)
_headers = st.builds(
    MessageHeader, _names, _names, _names, _names, st.integers(0, 2**32 - 1),
    st.integers(1, 10), st.none() | st.uuids(), st.none() | st.uuids(),
    st.none() | st.floats(allow_nan=False, allow_infinity=False),
)


@settings(max_examples=200)
@given(st.lists(_headers, min_size=1, max_size=6))
def test_each_message_header_decodes_as_itself_however_often_headers_repeat(
    headers: list[MessageHeader],
) -> None:
    # Decoded headers are remembered by their bytes: a header seen before, or one that
    # differs from it in a single field, must still decode to exactly what was sent.
    frames = [Fragment(DK, i, 0, 1, b"p", h) for i, h in enumerate(headers)]
    for _ in range(2):
        for frame in frames:
            decoded = decode_body(frame.TYPE, encode_body(frame))
            assert decoded == frame
            assert isinstance(decoded, Fragment) and decoded.header == frame.header


def test_a_damaged_copy_of_a_known_header_is_still_refused() -> None:
    frame = EXAMPLES[6]
    body = encode_body(frame)
    assert decode_body(frame.TYPE, body) == frame  # now known
    flag = body.index(b"\x01" + struct.pack("!d", 12.5))  # the expiry flag
    with pytest.raises(RemoteProtocolError):
        decode_body(frame.TYPE, body[:flag] + b"\x02" + body[flag + 1 :])


@settings(max_examples=300)
@given(st.binary(max_size=600))
def test_arbitrary_streams_only_raise_framing_errors(data: bytes) -> None:
    dec = FrameDecoder()
    dec.feed(data)
    try:
        while (raw := dec.next_frame()) is not None:
            assert not raw.verify(KEY)
            with contextlib.suppress(RemoteProtocolError):
                decode_body(raw.ftype, raw.body)
    except ProtocolError as exc:
        assert isinstance(exc, RemoteProtocolError)
