"""Activation (docs/activation.md): queue monitors, internal activation of procedures in worker
threads, QUEUE_ACTIVATION event notifications, and the external activator."""

from __future__ import annotations

from sbroker.services.activation.monitor import (
    INACTIVE,
    NOTIFIED,
    RECEIVES_OCCURRING,
    Monitor,
)
from sbroker.services.activation.service import (
    ActivationContext,
    ActivationService,
    resolve_procedure,
)

__all__ = [
    "INACTIVE",
    "NOTIFIED",
    "RECEIVES_OCCURRING",
    "ActivationContext",
    "ActivationService",
    "Monitor",
    "resolve_procedure",
]
