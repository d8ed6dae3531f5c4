"""What a broker transaction records for COMMIT: one typed operation per statement.

NamedTuples rather than frozen dataclasses: as typed and immutable, and a SEND of a
100-message transaction builds one a message, where a dataclass's ``__init__`` costs four
times a tuple's."""

from __future__ import annotations

from typing import NamedTuple

from sbroker.engine.endpoints import Endpoint


class Begin(NamedTuple):
    """BEGIN DIALOG: insert the initiator endpoint (a copy, as the statement made it)."""

    endpoint: Endpoint


class Send(NamedTuple):
    """SEND one message on one or several conversations."""

    handles: tuple[str, ...]
    message_type: str
    body: bytes
    trace: str | None = None  # the traceparent of its send span (tracing on), else None


class End(NamedTuple):
    """END CONVERSATION: plain, WITH ERROR, or WITH CLEANUP."""

    handle: str
    error: int | None
    description: str | None
    cleanup: bool


class Timer(NamedTuple):
    """BEGIN CONVERSATION TIMER: fire at ``at`` (the broker clock's seconds)."""

    handle: str
    at: float


class Move(NamedTuple):
    """MOVE CONVERSATION to another group of its queue."""

    handle: str
    group: str


Op = Begin | Send | End | Timer | Move
