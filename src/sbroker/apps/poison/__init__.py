"""Poison-message handling for activated procedures (docs/poison.md): see :mod:`.guard`."""

from __future__ import annotations

from sbroker.apps.poison.guard import (
    REDRIVABLE,
    ParkingService,
    PoisonGuard,
    Policy,
    ensure_tables,
    guarded,
    install,
    list_incidents,
    list_messages,
    redrive,
    redrive_due,
)

__all__ = [
    "REDRIVABLE",
    "ParkingService",
    "PoisonGuard",
    "Policy",
    "ensure_tables",
    "guarded",
    "install",
    "list_incidents",
    "list_messages",
    "redrive",
    "redrive_due",
]
