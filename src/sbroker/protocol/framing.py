"""The envelope around every frame: a checked header, the body, and a keyed integrity check.

Layout: ``magic "SB" | version u8 | type u8 | body length u32 | CRC-32 of those 8 bytes``,
then the body, then a MAC (HMAC-SHA256 over header and body, truncated to 16 bytes). The
header CRC lets a stream detect a damaged length at once (the connection then closes, since
a byte stream cannot be resynchronised); a failed MAC only drops that one frame.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
import zlib
from typing import NamedTuple

from sbroker.protocol.errors import FramingError

__all__ = [
    "HEADER_SIZE",
    "MAC_SIZE",
    "MAX_BODY",
    "VERSION",
    "FrameDecoder",
    "RawFrame",
    "mac",
    "seal",
]

MAGIC = b"SB"
VERSION = 1
MAC_SIZE = 16
MAX_BODY = 16 * 1024 * 1024
_HEAD = struct.Struct("!2sBBI")
_CRC = struct.Struct("!I")
HEADER_SIZE = _HEAD.size + _CRC.size


_KEYED: dict[bytes, hmac.HMAC] = {}  # HMAC state after the key, per key: copied per frame
_KEYED_MAX = 256


def mac(key: bytes, data: bytes) -> bytes:
    """Truncated HMAC-SHA256 of `data` under `key`."""
    keyed = _KEYED.get(key)
    if keyed is None:  # copying a keyed state halves the cost of keying afresh per frame
        if len(_KEYED) >= _KEYED_MAX:
            _KEYED.clear()
        keyed = _KEYED[key] = hmac.new(key, digestmod=hashlib.sha256)
    h = keyed.copy()
    h.update(data)
    return h.digest()[:MAC_SIZE]


def seal(ftype: int, body: bytes, key: bytes) -> bytes:
    """Wrap `body` in the envelope, signed with `key`."""
    if len(body) > MAX_BODY:
        raise FramingError("frame body larger than MAX_BODY")  # pragma: no cover - guarded
    head = _HEAD.pack(MAGIC, VERSION, ftype, len(body))
    signed = head + _CRC.pack(zlib.crc32(head)) + body
    return signed + mac(key, signed)


class RawFrame(NamedTuple):
    """A frame cut from the stream whose MAC has not been checked yet (immutable; a tuple,
    the cheapest object to make once per frame)."""

    ftype: int
    body: bytes
    signed: bytes
    tag: bytes

    def verify(self, key: bytes) -> bool:
        """True when the MAC matches under `key` (constant-time comparison)."""
        return hmac.compare_digest(mac(key, self.signed), self.tag)


class FrameDecoder:
    """Cuts a byte stream into `RawFrame`s; a damaged header raises `FramingError`."""

    def __init__(self, max_body: int = MAX_BODY) -> None:
        self._buf = bytearray()
        self._max_body = max_body

    def feed(self, data: bytes) -> None:
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def next_frame(self) -> RawFrame | None:
        """The next complete frame, or None until more bytes arrive."""
        buf = self._buf
        if len(buf) < HEADER_SIZE:
            return None
        head = bytes(buf[: _HEAD.size])
        magic, version, ftype, length = _HEAD.unpack(head)
        (crc,) = _CRC.unpack_from(buf, _HEAD.size)
        if magic != MAGIC or crc != zlib.crc32(head):
            raise FramingError("damaged frame header")
        if version != VERSION:
            raise FramingError(f"unsupported protocol version {version}")
        if length > self._max_body:
            raise FramingError("frame body longer than the limit")
        total = HEADER_SIZE + length + MAC_SIZE
        if len(buf) < total:
            return None
        signed = bytes(buf[: HEADER_SIZE + length])
        tag = bytes(buf[HEADER_SIZE + length : total])
        del buf[:total]
        return RawFrame(ftype, signed[HEADER_SIZE:], signed, tag)
