"""The queue rowset (:class:`Message`), system message types and the Error body format."""

from __future__ import annotations

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


def new_id() -> str:
    """A fresh uppercase version-4 UUID string, the form SQL Server shows handles in."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex().upper()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


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
