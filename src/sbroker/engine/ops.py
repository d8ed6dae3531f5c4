"""What a broker transaction records for COMMIT: one typed operation per statement."""

from __future__ import annotations

from dataclasses import dataclass

from sbroker.engine.endpoints import Endpoint


@dataclass(frozen=True, slots=True)
class Begin:
    """BEGIN DIALOG: insert the initiator endpoint (a copy, as the statement made it)."""

    endpoint: Endpoint


@dataclass(frozen=True, slots=True)
class Send:
    """SEND one message on one or several conversations."""

    handles: tuple[str, ...]
    message_type: str
    body: bytes


@dataclass(frozen=True, slots=True)
class End:
    """END CONVERSATION: plain, WITH ERROR, or WITH CLEANUP."""

    handle: str
    error: int | None
    description: str | None
    cleanup: bool


@dataclass(frozen=True, slots=True)
class Timer:
    """BEGIN CONVERSATION TIMER: fire at ``at`` (the broker clock's seconds)."""

    handle: str
    at: float


@dataclass(frozen=True, slots=True)
class Move:
    """MOVE CONVERSATION to another group of its queue."""

    handle: str
    group: str


Op = Begin | Send | End | Timer | Move
