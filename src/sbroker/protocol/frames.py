"""Frames of the broker-to-broker protocol: frozen, self-validating dataclasses and their
binary bodies.

Only bodies live here; the envelope (header, length, keyed integrity check) is `framing`.
Constructing an invalid frame raises `LocalProtocolError`; decoding bytes that do not make a
valid frame raises `RemoteProtocolError` and nothing else.
"""

from __future__ import annotations

import enum
import math
import struct
from dataclasses import dataclass, field
from typing import ClassVar, TypeAlias
from uuid import UUID

from sbroker.protocol.errors import LocalProtocolError, RemoteProtocolError
from sbroker.protocol.extras import HAS_EXTRA, MAX_TRACE, extras, extras_at

__all__ = [
    "NONCE_SIZE",
    "PROOF_SIZE",
    "Accept",
    "Ack",
    "AckEntry",
    "AuthMode",
    "Challenge",
    "Close",
    "DialogKey",
    "Fragment",
    "Frame",
    "FrameType",
    "Hello",
    "Keepalive",
    "MessageHeader",
    "Proof",
    "Refuse",
    "decode_body",
    "dialog_key",
    "encode_body",
]

NONCE_SIZE = 32
PROOF_SIZE = 32
MAX_NAME_BYTES = 4000
MAX_ACKS = 4096
_U32 = 2**32 - 1
_U64 = 2**64 - 1


class FrameType(enum.IntEnum):
    """Frame type byte in the envelope header."""

    HELLO = 1
    CHALLENGE = 2
    PROOF = 3
    ACCEPT = 4
    REFUSE = 5
    FRAGMENT = 6
    ACK = 7
    KEEPALIVE = 8
    CLOSE = 9


class AuthMode(enum.IntEnum):
    """How the handshake authenticates: a shared secret, or a transport (TLS) already did."""

    SECRET = 1
    TRANSPORT = 2


def _check(cond: bool, what: str) -> None:
    if not cond:
        raise LocalProtocolError(what)


def _check_name(value: str, what: str) -> None:
    if not isinstance(value, str):
        raise LocalProtocolError(f"{what} must be a str")
    if len(value) * 4 > MAX_NAME_BYTES and len(value.encode("utf-8", "surrogatepass")) > (
        MAX_NAME_BYTES
    ):
        raise LocalProtocolError(f"{what} too long")


@dataclass(frozen=True, slots=True)
class DialogKey:
    """One direction of one conversation: its messages share a sequence-number space."""

    conversation_id: UUID
    from_initiator: bool
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check(isinstance(self.conversation_id, UUID), "conversation_id must be a UUID")
        _check(isinstance(self.from_initiator, bool), "from_initiator must be a bool")
        # keys are hashed on every dict access of the hot path: compute it once
        object.__setattr__(self, "_hash", hash((self.conversation_id.int, self.from_initiator)))

    def __hash__(self) -> int:
        return self._hash


_INTERNED: dict[tuple[int, bool], DialogKey] = {}
_INTERNED_MAX = 65536


def dialog_key(conversation_id: UUID, from_initiator: bool) -> DialogKey:
    """The shared `DialogKey` of a dialog direction: the hot path looks keys up in many
    dicts, and one object per direction makes each lookup an identity check."""
    k = (conversation_id.int, from_initiator)
    key = _INTERNED.get(k)
    if key is None:
        if len(_INTERNED) >= _INTERNED_MAX:
            _INTERNED.clear()
        key = _INTERNED[k] = DialogKey(conversation_id, from_initiator)
    return key


@dataclass(frozen=True, slots=True)
class AckEntry:
    """Cumulative acknowledgement: every message of `key` with seq < `next_seq` is durable.

    `held` reports a gap: bit i set means the receiver holds message `next_seq + i` already
    (delivered or waiting behind a missing one), so the unset ones below the highest set bit
    are missing and the sender may retransmit them at once. 0: no gap to report."""

    key: DialogKey
    next_seq: int
    held: int = 0

    def __post_init__(self) -> None:
        _check(0 <= self.next_seq <= _U64, "next_seq out of range")
        _check(0 <= self.held <= _U64, "held out of range")


@dataclass(frozen=True, slots=True)
class MessageHeader:
    """What the receiver needs to enqueue a message; carried by fragment 0 only."""

    message_type: str
    from_service: str
    to_service: str
    contract: str
    body_length: int
    priority: int = 5
    origin_instance: UUID | None = None
    target_instance: UUID | None = None
    expires_at: float | None = None

    def __post_init__(self) -> None:
        for name in ("message_type", "from_service", "to_service", "contract"):
            _check_name(getattr(self, name), name)
        _check(0 <= self.body_length <= _U32, "body_length out of range")
        _check(1 <= self.priority <= 10, "priority must be 1..10")
        for name in ("origin_instance", "target_instance"):
            value = getattr(self, name)
            _check(value is None or isinstance(value, UUID), f"{name} must be a UUID or None")
        _check(
            self.expires_at is None or math.isfinite(self.expires_at), "expires_at must be finite"
        )


@dataclass(frozen=True, slots=True)
class Hello:
    """Initiator → responder: who I am, whom I expect, my nonce and how we authenticate."""

    TYPE: ClassVar[FrameType] = FrameType.HELLO
    instance: UUID
    nonce: bytes
    mode: AuthMode = AuthMode.SECRET
    expected_peer: UUID | None = None

    def __post_init__(self) -> None:
        _check(isinstance(self.instance, UUID), "instance must be a UUID")
        _check(len(self.nonce) == NONCE_SIZE, "nonce has the wrong size")
        _check(self.expected_peer is None or isinstance(self.expected_peer, UUID), "bad peer")


@dataclass(frozen=True, slots=True)
class Challenge:
    """Responder → initiator: who I am, my nonce, and my proof of the shared secret."""

    TYPE: ClassVar[FrameType] = FrameType.CHALLENGE
    instance: UUID
    nonce: bytes
    proof: bytes

    def __post_init__(self) -> None:
        _check(isinstance(self.instance, UUID), "instance must be a UUID")
        _check(len(self.nonce) == NONCE_SIZE, "nonce has the wrong size")
        _check(len(self.proof) == PROOF_SIZE, "proof has the wrong size")


@dataclass(frozen=True, slots=True)
class Proof:
    """Initiator → responder: the initiator's proof of the shared secret."""

    TYPE: ClassVar[FrameType] = FrameType.PROOF
    proof: bytes

    def __post_init__(self) -> None:
        _check(len(self.proof) == PROOF_SIZE, "proof has the wrong size")


@dataclass(frozen=True, slots=True)
class Accept:
    """Responder → initiator, under the session key: the handshake succeeded."""

    TYPE: ClassVar[FrameType] = FrameType.ACCEPT


@dataclass(frozen=True, slots=True)
class Refuse:
    """Either side: the handshake failed, with a reason in words; the connection closes."""

    TYPE: ClassVar[FrameType] = FrameType.REFUSE
    reason: str

    def __post_init__(self) -> None:
        _check_name(self.reason, "reason")


@dataclass(frozen=True, slots=True)
class Fragment:
    """One piece of one message, with acknowledgements piggybacked for any dialogs."""

    TYPE: ClassVar[FrameType] = FrameType.FRAGMENT
    key: DialogKey
    seq: int
    index: int
    count: int
    payload: bytes
    header: MessageHeader | None = None
    acks: tuple[AckEntry, ...] = ()
    trace: str | None = None  # the message's W3C traceparent, on fragment 0 only (optional)

    def __post_init__(self) -> None:
        _check(0 <= self.seq <= _U64, "seq out of range")
        _check(1 <= self.count <= _U32, "count out of range")
        _check(0 <= self.index < self.count, "index out of range")
        _check((self.index == 0) == (self.header is not None), "header iff index 0")
        _check(len(self.acks) <= MAX_ACKS, "too many acks")
        _check(self.trace is None or (self.index == 0 and len(self.trace) <= MAX_TRACE), "trace")


@dataclass(frozen=True, slots=True)
class Ack:
    """Acknowledgements alone, when no return traffic carried them in time."""

    TYPE: ClassVar[FrameType] = FrameType.ACK
    acks: tuple[AckEntry, ...]

    def __post_init__(self) -> None:
        _check(0 < len(self.acks) <= MAX_ACKS, "an Ack frame carries 1..MAX_ACKS entries")


@dataclass(frozen=True, slots=True)
class Keepalive:
    """Sent on an idle but open connection so that the peer knows we are alive."""

    TYPE: ClassVar[FrameType] = FrameType.KEEPALIVE


@dataclass(frozen=True, slots=True)
class Close:
    """Orderly close of the connection (idle, or shutting down), with a reason."""

    TYPE: ClassVar[FrameType] = FrameType.CLOSE
    reason: str

    def __post_init__(self) -> None:
        _check_name(self.reason, "reason")


Frame: TypeAlias = Hello | Challenge | Proof | Accept | Refuse | Fragment | Ack | Keepalive | Close

# ---------------------------------------------------------------------------------------
# encoding

_ACK = struct.Struct("!16sBQ")
_HELD = struct.Struct("!Q")
_HAS_HELD = 2  # in an ack entry's direction byte: a `held` bitmap follows the entry
_FRAG = struct.Struct("!16sBQII")
_HDR = struct.Struct("!IB")
_HELLO = struct.Struct("!16s32sB")
_U16 = struct.Struct("!H")
_F64 = struct.Struct("!d")
_HAS_HEADER = 2


def _str(value: str) -> bytes:
    data = value.encode("utf-8", "surrogatepass")
    return _U16.pack(len(data)) + data


def _opt_uuid(value: UUID | None) -> bytes:
    return b"\x00" if value is None else b"\x01" + value.bytes


def _acks(acks: tuple[AckEntry, ...]) -> bytes:
    parts = [_U16.pack(len(acks))]
    for a in acks:
        if a.held:
            parts.append(_ACK.pack(a.key.conversation_id.bytes,
                                   int(a.key.from_initiator) | _HAS_HELD, a.next_seq))
            parts.append(_HELD.pack(a.held))
        else:
            parts.append(_ACK.pack(a.key.conversation_id.bytes, int(a.key.from_initiator),
                                   a.next_seq))
    return b"".join(parts)


# Encoded headers by header object (kept alive in the value, so an id is never reused while
# its entry stands): the messages of a dialog share one header object (see Message.header).
_ENCODED: dict[int, tuple[MessageHeader, bytes]] = {}
_ENCODED_MAX = 4096


def _header_bytes(h: MessageHeader) -> bytes:
    entry = _ENCODED.get(id(h))
    if entry is not None and entry[0] is h:
        return entry[1]
    data = b"".join((
        _HDR.pack(h.body_length, h.priority),
        _str(h.message_type),
        _str(h.from_service),
        _str(h.to_service),
        _str(h.contract),
        _opt_uuid(h.origin_instance),
        _opt_uuid(h.target_instance),
        b"\x00" if h.expires_at is None else b"\x01" + _F64.pack(h.expires_at),
    ))
    if len(_ENCODED) >= _ENCODED_MAX:
        _ENCODED.clear()
    _ENCODED[id(h)] = (h, data)
    return data


def encode_body(frame: Frame) -> bytes:
    """The body bytes of `frame` (without envelope)."""
    if isinstance(frame, Fragment):
        head = _FRAG.pack(
            frame.key.conversation_id.bytes,
            int(frame.key.from_initiator) | (_HAS_HEADER if frame.header else 0)
            | (HAS_EXTRA if frame.trace is not None else 0),
            frame.seq,
            frame.index,
            frame.count,
        )
        h = frame.header
        if h is None:
            return b"".join((_acks(frame.acks), head, frame.payload))
        extra = b"" if frame.trace is None else extras(frame.trace)
        return b"".join((_acks(frame.acks), head, _header_bytes(h), extra, frame.payload))
    if isinstance(frame, Ack):
        return _acks(frame.acks)
    if isinstance(frame, Hello):
        return _HELLO.pack(frame.instance.bytes, frame.nonce, frame.mode) + _opt_uuid(
            frame.expected_peer
        )
    if isinstance(frame, Challenge):
        return frame.instance.bytes + frame.nonce + frame.proof
    if isinstance(frame, Proof):
        return frame.proof
    if isinstance(frame, Refuse | Close):
        return _str(frame.reason)
    return b""


# ---------------------------------------------------------------------------------------
# decoding


class _Reader:
    """Bounds-checked cursor over a body; every shortfall is a `RemoteProtocolError`."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise RemoteProtocolError("frame body truncated")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def unpack(self, st: struct.Struct) -> tuple[object, ...]:
        return st.unpack(self.take(st.size))

    def byte(self) -> int:
        return self.take(1)[0]

    def flag(self) -> bool:
        value = self.byte()
        if value > 1:
            raise RemoteProtocolError("flag byte is neither 0 nor 1")
        return value == 1

    def text(self) -> str:
        (n,) = self.unpack(_U16)
        assert isinstance(n, int)
        try:
            return self.take(n).decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise RemoteProtocolError("invalid UTF-8 in a name") from exc

    def opt_uuid(self) -> UUID | None:
        return UUID(bytes=self.take(16)) if self.flag() else None

    def end(self) -> None:
        if self.pos != len(self.data):
            raise RemoteProtocolError("trailing bytes after frame body")


_KEY_CACHE: dict[bytes, DialogKey] = {}
_KEY_CACHE_MAX = 65536


def _key(raw: bytes) -> DialogKey:
    """DialogKey from 16 id bytes + 1 flag byte, cached: the same dialogs recur constantly."""
    key = _KEY_CACHE.get(raw)
    if key is None:
        if raw[16] > 1:
            raise RemoteProtocolError("bad direction flag")
        if len(_KEY_CACHE) >= _KEY_CACHE_MAX:
            _KEY_CACHE.clear()
        key = _KEY_CACHE[raw] = dialog_key(UUID(bytes=raw[:16]), raw[16] == 1)
    return key


def _acks_at(body: bytes, pos: int) -> tuple[tuple[AckEntry, ...], int]:
    (n,) = _U16.unpack_from(body, pos)
    pos += 2
    if n > MAX_ACKS or pos + n * _ACK.size > len(body):
        raise RemoteProtocolError("bad ack list")
    acks = []
    for _ in range(n):
        end = pos + _ACK.size
        flags = body[pos + 16]
        if flags & _HAS_HELD:
            (held,) = _HELD.unpack_from(body, end)
            key = _key(body[pos : pos + 16] + bytes([flags & ~_HAS_HELD]))
            if not held:
                raise RemoteProtocolError("an empty held bitmap")
            acks.append(AckEntry(key, int.from_bytes(body[pos + 17 : end], "big"), held))
            end += _HELD.size
        else:
            acks.append(AckEntry(_key(body[pos : pos + 17]),
                                 int.from_bytes(body[pos + 17 : end], "big")))
        pos = end
    if pos > len(body):
        raise RemoteProtocolError("bad ack list")
    return tuple(acks), pos


def _text_at(body: bytes, pos: int) -> tuple[str, int]:
    (n,) = _U16.unpack_from(body, pos)
    end = pos + 2 + n
    if end > len(body):
        raise RemoteProtocolError("frame body truncated")
    return body[pos + 2 : end].decode("utf-8", "surrogatepass"), end


def _opt_uuid_at(body: bytes, pos: int) -> tuple[UUID | None, int]:
    flag = body[pos]
    if flag == 0:
        return None, pos + 1
    if flag != 1 or pos + 17 > len(body):
        raise RemoteProtocolError("bad optional id")
    return UUID(bytes=body[pos + 1 : pos + 17]), pos + 17


def _read_acks(r: _Reader) -> tuple[AckEntry, ...]:
    acks, r.pos = _acks_at(r.data, r.pos)
    return acks


def _read_fragment(r: _Reader) -> Fragment:
    """Fragments are the hot path: decoded with offsets rather than through the reader."""
    body = r.data
    acks, pos = _acks_at(body, r.pos)
    flags = body[pos + 16] if pos + 16 < len(body) else 0
    if flags > 7 or (flags & HAS_EXTRA and not flags & _HAS_HEADER):
        raise RemoteProtocolError("bad fragment flags")
    key = _key(body[pos : pos + 16] + bytes([flags & 1]))
    _, _, seq, index, count = _FRAG.unpack_from(body, pos)
    pos += _FRAG.size
    header = None
    if flags & _HAS_HEADER:
        end = _header_end(body, pos)
        raw = body[pos:end]
        header = _HEADER_CACHE.get(raw)
        if header is None:
            header, parsed_end = _parse_header(body, pos)
            if parsed_end != end:  # pragma: no cover - both read the same lengths
                raise RemoteProtocolError("inconsistent message header")
            if len(_HEADER_CACHE) >= _HEADER_CACHE_MAX:
                _HEADER_CACHE.clear()
            _HEADER_CACHE[raw] = header
        pos = end
    trace, pos = extras_at(body, pos) if flags & HAS_EXTRA else (None, pos)
    r.pos = len(body)
    return Fragment(key, seq, index, count, body[pos:], header, acks, trace)


# Decoded message headers by their bytes: the messages of a dialog repeat the same header
# (names, instances, expiry; also the length when the bodies are of one size), and frozen
# headers can be shared. Decoding names, ids and validating them is most of a fragment's cost.
_HEADER_CACHE: dict[bytes, MessageHeader] = {}
_HEADER_CACHE_MAX = 4096


def _header_end(body: bytes, pos: int) -> int:
    """Where the message header starting at `pos` ends (lengths and flags only)."""
    pos += _HDR.size
    for _ in range(4):
        pos += 2 + _U16.unpack_from(body, pos)[0]
    pos += 17 if body[pos] else 1
    pos += 17 if body[pos] else 1
    pos += 9 if body[pos] else 1
    if pos > len(body):
        raise RemoteProtocolError("frame body truncated")
    return pos


def _parse_header(body: bytes, pos: int) -> tuple[MessageHeader, int]:
    body_length, priority = _HDR.unpack_from(body, pos)
    pos += _HDR.size
    mtype, pos = _text_at(body, pos)
    from_service, pos = _text_at(body, pos)
    to_service, pos = _text_at(body, pos)
    contract, pos = _text_at(body, pos)
    origin, pos = _opt_uuid_at(body, pos)
    target, pos = _opt_uuid_at(body, pos)
    expires = None
    if body[pos] > 1:
        raise RemoteProtocolError("bad expiry flag")
    if body[pos] == 1:
        (expires,) = _F64.unpack_from(body, pos + 1)
        pos += _F64.size
    pos += 1
    header = MessageHeader(
        mtype, from_service, to_service, contract, body_length, priority, origin, target,
        expires,
    )  # fmt: skip
    return header, pos


def _read(ftype: FrameType, r: _Reader) -> Frame:
    frame: Frame
    if ftype is FrameType.FRAGMENT:
        return _read_fragment(r)
    if ftype is FrameType.ACK:
        frame = Ack(_read_acks(r))
    elif ftype is FrameType.HELLO:
        inst, nonce, mode = r.unpack(_HELLO)
        assert isinstance(inst, bytes) and isinstance(nonce, bytes) and isinstance(mode, int)
        try:
            auth = AuthMode(mode)
        except ValueError as exc:
            raise RemoteProtocolError("unknown authentication mode") from exc
        frame = Hello(UUID(bytes=inst), nonce, auth, r.opt_uuid())
    elif ftype is FrameType.CHALLENGE:
        frame = Challenge(UUID(bytes=r.take(16)), r.take(NONCE_SIZE), r.take(PROOF_SIZE))
    elif ftype is FrameType.PROOF:
        frame = Proof(r.take(PROOF_SIZE))
    elif ftype is FrameType.ACCEPT:
        frame = Accept()
    elif ftype is FrameType.REFUSE:
        frame = Refuse(r.text())
    elif ftype is FrameType.KEEPALIVE:
        frame = Keepalive()
    else:
        frame = Close(r.text())
    r.end()
    return frame


_FRAME_TYPES = {int(t): t for t in FrameType}


def decode_body(ftype: int, body: bytes) -> Frame:
    """Decode a frame body of type `ftype`; raises only `RemoteProtocolError`."""
    kind = _FRAME_TYPES.get(ftype)
    if kind is None:
        raise RemoteProtocolError(f"unknown frame type {ftype}")
    try:
        return _read(kind, _Reader(body))
    except LocalProtocolError as exc:  # a field the peer sent fails validation
        raise RemoteProtocolError(f"invalid {kind.name} frame: {exc}") from exc
    except (struct.error, IndexError) as exc:  # offsets ran past the end of the body
        raise RemoteProtocolError(f"{kind.name} frame body truncated") from exc
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError("invalid UTF-8 in a name") from exc
