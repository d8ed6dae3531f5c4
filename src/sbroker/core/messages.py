"""The queue rowset (:class:`Message`), system message types and the Error body format."""

from __future__ import annotations

import binascii
import json
import os
import re
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

END_DIALOG = "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog"
ERROR = "http://schemas.microsoft.com/SQL/ServiceBroker/Error"
DIALOG_TIMER = "http://schemas.microsoft.com/SQL/ServiceBroker/DialogTimer"
EVENT_NOTIFICATION = "http://schemas.microsoft.com/SQL/Notifications/EventNotification"
POST_EVENT_NOTIFICATION = "http://schemas.microsoft.com/SQL/Notifications/PostEventNotification"
DEFAULT = "DEFAULT"
#: What an unsent message toward a remote peer becomes when its conversation errors: the
#: receiver only advances its sequence number (never queued, never shown).
DROPPED = "urn:sbroker:network:dropped"

#: Message types every contract allows, in either direction.
SYSTEM_MESSAGE_TYPES = frozenset({END_DIALOG, ERROR, DIALOG_TIMER})

# Broker-generated error codes (negative, as SQL Server sends them).
LIFETIME_EXPIRED = -8489
TARGET_SERVICE_NOT_FOUND = -8490
CONTRACT_NOT_SUPPORTED = -8408
UNKNOWN_MESSAGE_TYPE = -8428
VALIDATION_FAILED = -9615

_ERROR_NS = "http://schemas.microsoft.com/SQL/ServiceBroker/Error"
_ERROR_RE = re.compile(
    r"<Code>(-?\d+)</Code>\s*<Description>(.*?)</Description>", re.DOTALL
)


def error_body(code: int, description: str) -> bytes:
    """The XML body of an Error message, exactly as SQL Server formats it."""
    return (
        f'<Error xmlns="{_ERROR_NS}"><Code>{code}</Code>'
        f"<Description>{escape(description)}</Description></Error>"
    ).encode()


def parse_error_body(body: bytes) -> tuple[int, str]:
    """(code, description) of an Error message body."""
    from xml.sax.saxutils import unescape

    match = _ERROR_RE.search(body.decode("utf-8", errors="replace"))
    if match is None:
        raise ValueError("not a Service Broker Error message body")
    return int(match.group(1)), unescape(match.group(2))


_IDS_AT_ONCE = 128
# The version (4) and variant (10) bits of _IDS_AT_ONCE UUIDs laid end to end.
_ID_MASK = int.from_bytes(bytes.fromhex("FFFFFFFFFFFF0FFF3FFFFFFFFFFFFFFF") * _IDS_AT_ONCE)
_ID_BITS = int.from_bytes(bytes.fromhex("00000000000040008000000000000000") * _IDS_AT_ONCE)
_ids: list[str] = []  # made ahead; list.pop and list.extend are atomic, so threads may share
os.register_at_fork(after_in_child=_ids.clear)  # a forked child must not reuse the parent's


# Where each of a UUID's 32 hex digits goes in its 36 characters (a hyphen after 8, 12, 16, 20).
_MOVES = [(digit, digit + (digit >= 8) + (digit >= 12) + (digit >= 16) + (digit >= 20))
          for digit in range(32)]
_HYPHENS = b"-" * (37 * _IDS_AT_ONCE)  # 36 characters and a space per UUID
_SPACES = b" " * _IDS_AT_ONCE


def _make_ids() -> list[str]:
    """The next UUIDs, laid out by digit position for all of them at once (32 slice copies)
    rather than sliced and joined one by one."""
    n = int.from_bytes(os.urandom(16 * _IDS_AT_ONCE)) & _ID_MASK | _ID_BITS
    digits = binascii.hexlify(n.to_bytes(16 * _IDS_AT_ONCE)).upper()
    out = bytearray(_HYPHENS)
    for digit, at in _MOVES:
        out[at::37] = digits[digit::32]
    out[36::37] = _SPACES
    return out.decode().split()


def new_id() -> str:
    """A fresh uppercase version-4 UUID string, the form SQL Server shows handles in.

    One ``os.urandom`` call makes the next 128 (half the cost of one call each)."""
    try:
        return _ids.pop()
    except IndexError:
        _ids.extend(_make_ids())
        return _ids.pop()


@dataclass(frozen=True, slots=True)
class Message:
    """One row of a queue, as RECEIVE and ``broker.peek`` return it."""

    status: int
    priority: int
    queuing_order: int
    conversation_group_id: str
    conversation_handle: str
    message_sequence_number: int
    service_name: str
    service_contract_name: str
    message_type_name: str
    validation: str
    message_body: bytes
    message_id: str
    message_enqueue_time: float = 0.0  # seconds since the epoch, on the broker's clock
    # The W3C ``traceparent`` of the SEND that made the message (docs/tracing.md), or None.
    trace_context: str | None = None

    def text(self) -> str:
        """The body decoded as UTF-8."""
        return self.message_body.decode("utf-8")

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.message_body)

    @property
    def is_error(self) -> bool:
        return self.message_type_name == ERROR

    @property
    def is_end_dialog(self) -> bool:
        return self.message_type_name == END_DIALOG

    def error(self) -> tuple[int, str]:
        """(code, description) if this is an Error message."""
        return parse_error_body(self.message_body)


_set = {name: getattr(Message, name).__set__ for name in Message.__dataclass_fields__}


def message_from_row(
    row: Any, _new: Any = object.__new__, _m: type[Message] = Message,
    _a: Any = _set["status"], _b: Any = _set["priority"], _c: Any = _set["queuing_order"],
    _d: Any = _set["conversation_group_id"], _e: Any = _set["conversation_handle"],
    _f: Any = _set["message_sequence_number"], _g: Any = _set["service_name"],
    _h: Any = _set["service_contract_name"], _i: Any = _set["message_type_name"],
    _j: Any = _set["validation"], _k: Any = _set["message_body"], _l: Any = _set["message_id"],
    _n: Any = _set["message_enqueue_time"], _o: Any = _set["trace_context"],
) -> Message:
    """``Message(*row)`` for a queue row of all its columns, without the frozen dataclass's
    ``__init__`` (which sets each field through ``object.__setattr__``): RECEIVE makes one per
    row. The bound slot setters below are the fields in order."""
    if len(row) != 14:
        return _m(*row)
    msg: Message = _new(_m)
    _a(msg, row[0])
    _b(msg, row[1])
    _c(msg, row[2])
    _d(msg, row[3])
    _e(msg, row[4])
    _f(msg, row[5])
    _g(msg, row[6])
    _h(msg, row[7])
    _i(msg, row[8])
    _j(msg, row[9])
    _k(msg, row[10])
    _l(msg, row[11])
    _n(msg, row[12])
    _o(msg, row[13])
    return msg
